{
  "variables": {
    "march_native%": "false"
  },
  "targets": [
    {
      "target_name": "sublinear",
      "sources": [
        "<!@(node -p \"require('fs').readdirSync('native').filter(f => f.endsWith('.cc')).sort().map(f => 'native/' + f).join(' ')\")"
      ],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")",
        "native"
      ],
      "defines": ["NAPI_VERSION=8", "NAPI_CPP_EXCEPTIONS", "NODE_ADDON_API_DISABLE_DEPRECATED"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti"],
      "cflags_cc": ["-std=c++17", "-O3", "-fno-math-errno", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      "conditions": [
        ["march_native=='true'", { "cflags_cc": ["-march=native"] }],
        ["OS=='mac'", {
          "xcode_settings": {
            "GCC_ENABLE_CPP_EXCEPTIONS": "YES",
            "CLANG_CXX_LANGUAGE_STANDARD": "c++17",
            "OTHER_CPLUSPLUSFLAGS": ["-O3"]
          }
        }]
      ]
    }
  ]
}
