{
  "targets": [
    {
      "target_name": "sublinear_mpi",
      "sources": ["mpi.cc"],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")",
        "../native",
        "<!@(node ../scripts/build-mpi.cjs --print include_dirs)"
      ],
      "defines": ["NAPI_VERSION=8", "NAPI_CPP_EXCEPTIONS", "NODE_ADDON_API_DISABLE_DEPRECATED", "OMPI_SKIP_MPICXX", "MPICH_SKIP_MPICXX"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti"],
      "cflags_cc": ["-std=c++17", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "<!@(node ../scripts/build-mpi.cjs --print cflags)"],
      "libraries": ["<!@(node ../scripts/build-mpi.cjs --print libs)", "-ldl"]
    }
  ]
}
