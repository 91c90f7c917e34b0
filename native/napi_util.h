// Helpers shared by every Node-API binding file: typed-array access with cheap re-checks, and the
// wrapper that turns C++ exceptions into JS exceptions (the addon must never abort the process).
//
// TypeScript validates arguments with user-facing messages; these checks are the cheap second line
// (type, length) so that a bug in the TS layer becomes an exception instead of memory corruption.
#pragma once
#include <napi.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace sl {

// Error raised by kernels on caller mistakes; becomes a JS Error with the same message.
struct ArgError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

template <typename T> struct TypedArrayTraits;
template <> struct TypedArrayTraits<float> { static constexpr napi_typedarray_type type = napi_float32_array; static constexpr const char* name = "Float32Array"; };
template <> struct TypedArrayTraits<double> { static constexpr napi_typedarray_type type = napi_float64_array; static constexpr const char* name = "Float64Array"; };
template <> struct TypedArrayTraits<uint32_t> { static constexpr napi_typedarray_type type = napi_uint32_array; static constexpr const char* name = "Uint32Array"; };
template <> struct TypedArrayTraits<int32_t> { static constexpr napi_typedarray_type type = napi_int32_array; static constexpr const char* name = "Int32Array"; };
template <> struct TypedArrayTraits<int8_t> { static constexpr napi_typedarray_type type = napi_int8_array; static constexpr const char* name = "Int8Array"; };
template <> struct TypedArrayTraits<uint8_t> { static constexpr napi_typedarray_type type = napi_uint8_array; static constexpr const char* name = "Uint8Array"; };

// A (pointer, length) view into a JS typed array. Pointers into SharedArrayBuffers stay valid for the
// life of the buffer (a SAB cannot be detached); we never keep them past one call anyway.
template <typename T> struct Span {
  T* data = nullptr;
  size_t size = 0;
  T& operator[](size_t i) const { return data[i]; }
};

// Reads `value` as a typed array of element type T. `minLength` (if non-zero) is checked.
template <typename T>
Span<T> GetArray(const Napi::Value& value, const char* what, size_t minLength = 0) {
  if (!value.IsTypedArray()) throw ArgError(std::string("Expected ") + TypedArrayTraits<T>::name + " for " + what);
  auto ta = value.As<Napi::TypedArray>();
  if (ta.TypedArrayType() != TypedArrayTraits<T>::type)
    throw ArgError(std::string("Expected ") + TypedArrayTraits<T>::name + " for " + what);
  Span<T> s;
  // napi_get_typedarray_info works for views of SharedArrayBuffers too; going through ta.ArrayBuffer().Data()
  // would call napi_get_arraybuffer_info, which rejects a SharedArrayBuffer ("Invalid argument").
  napi_typedarray_type type;
  size_t length = 0;
  void* data = nullptr;
  napi_status status = napi_get_typedarray_info(value.Env(), value, &type, &length, &data, nullptr, nullptr);
  if (status != napi_ok) throw ArgError(std::string("Cannot read typed array ") + what);
  s.size = length;
  s.data = static_cast<T*>(data);
  if (s.size < minLength)
    throw ArgError(std::string(what) + " is too short: expected at least " + std::to_string(minLength) +
                   " elements but received " + std::to_string(s.size));
  return s;
}

template <typename T>
Span<T> GetArrayProp(const Napi::Object& obj, const char* key, size_t minLength = 0) {
  return GetArray<T>(obj.Get(key), key, minLength);
}

inline uint32_t GetU32(const Napi::Value& v, const char* what) {
  if (!v.IsNumber()) throw ArgError(std::string("Expected number for ") + what);
  double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 0 && d <= 4294967295.0) || d != static_cast<double>(static_cast<uint64_t>(d)))
    throw ArgError(std::string("Expected unsigned 32-bit integer for ") + what);
  return static_cast<uint32_t>(d);
}
inline uint32_t GetU32Prop(const Napi::Object& o, const char* key) { return GetU32(o.Get(key), key); }

inline double GetF64(const Napi::Value& v, const char* what) {
  if (!v.IsNumber()) throw ArgError(std::string("Expected number for ") + what);
  return v.As<Napi::Number>().DoubleValue();
}
inline double GetF64Prop(const Napi::Object& o, const char* key) { return GetF64(o.Get(key), key); }

inline Napi::Object GetObject(const Napi::Value& v, const char* what) {
  if (!v.IsObject()) throw ArgError(std::string("Expected object for ") + what);
  return v.As<Napi::Object>();
}

// A fresh typed array holding a copy of v (results whose size is known only once computed).
template <typename T>
Napi::TypedArrayOf<T> CopyToTypedArray(Napi::Env env, const std::vector<T>& v) {
  auto a = Napi::TypedArrayOf<T>::New(env, v.size());
  std::copy(v.begin(), v.end(), a.Data());
  return a;
}

// Wraps a binding so that any C++ exception (including std::bad_alloc) becomes a JS exception.
// Napi::Error passes through unchanged; ArgError becomes a TypeError-free plain Error with its message.
template <Napi::Value (*Fn)(const Napi::CallbackInfo&)>
Napi::Value Guard(const Napi::CallbackInfo& info) {
  try {
    return Fn(info);
  } catch (const Napi::Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw Napi::Error::New(info.Env(), "sublinear native: out of memory");
  } catch (const std::exception& e) {
    throw Napi::Error::New(info.Env(), std::string("sublinear native: ") + e.what());
  }
}

// Registers `Guard<Fn>` under `name` on `exports`.
template <Napi::Value (*Fn)(const Napi::CallbackInfo&)>
void Export(Napi::Env env, Napi::Object exports, const char* name) {
  exports.Set(name, Napi::Function::New(env, Guard<Fn>, name));
}

}  // namespace sl
