// The scripts are the files of src/lua (prelude.lua and the libraries each names before it),
// embedded at build time by cmake/embed_lua.cmake; each is named by the SHA-1 of its text, as Redis
// names it.
#include "redlockd/resp/scripts.hpp"

#include <array>
#include <openssl/evp.h>
#include <stdexcept>
#include <string>

namespace redlockd {
namespace {

#include "redlockd/lua_scripts.inc"

struct script_file {
  std::string_view name; // the file's name in src/lua, without .lua
  std::string_view source;
};

// In the order of enum class script.
constexpr std::array<script_file, script_count> files = {{
    {"acquire", lua_acquire},
    {"release", lua_release},
    {"extend", lua_extend},
    {"fence_bump", lua_fence_bump},
    {"seed", lua_seed},
    {"hand_over", lua_hand_over},
    {"acquire_wait", lua_acquire_wait},
    {"shared_acquire", lua_shared_acquire},
    {"shared_release", lua_shared_release},
    {"shared_extend", lua_shared_extend},
    {"permit_acquire", lua_permit_acquire},
    {"permit_release", lua_permit_release},
    {"permit_extend", lua_permit_extend},
    {"multi_acquire", lua_multi_acquire},
    {"multi_release", lua_multi_release},
    {"multi_extend", lua_multi_extend},
    {"unmark", lua_unmark},
    {"break", lua_break},
    {"list", lua_list},
    {"status", lua_status},
    {"wake_yielded", lua_wake_yielded},
}};

} // namespace

std::string sha1_hex(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha1(), nullptr) != 1)
    throw std::runtime_error("OpenSSL could not compute a SHA-1");
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * size);
  for (unsigned int i = 0; i < size; ++i) {
    out.push_back(hex[digest[i] >> 4]);
    out.push_back(hex[digest[i] & 0xf]);
  }
  return out;
}

std::string_view script_source(script s) {
  return files[static_cast<std::size_t>(s)].source;
}

std::string_view script_name(script s) {
  return files[static_cast<std::size_t>(s)].name;
}

std::string_view script_sha(script s) {
  static const auto shas = [] {
    std::array<std::string, script_count> out;
    for (std::size_t i = 0; i < script_count; ++i)
      out[i] = sha1_hex(files[i].source);
    return out;
  }();
  return shas[static_cast<std::size_t>(s)];
}

} // namespace redlockd
