#pragma once

#include <memory>

namespace outbox {

// Owns a C handle with its library's destroy function: std::unique_ptr<T, CDeleter<&T_Destroy>>.
template <auto DestroyFn>
struct CDeleter {
  template <typename T>
  void operator()(T* handle) const {
    if (handle != nullptr) DestroyFn(handle);
  }
};

template <typename T, auto DestroyFn>
using CHandle = std::unique_ptr<T, CDeleter<DestroyFn>>;

}  // namespace outbox
