// Redis's scripting, as far as redlockd's scripts can tell: see lua_engine.hpp. Lua raises errors
// with longjmp, so the C functions the scripts call keep no C++ object with a destructor alive
// across a call that may raise (the writer and the argument views are trivially destructible).
#include "lua_engine.hpp"

#include "redlockd/resp/scripts.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <lua.hpp>
#include <stdexcept>
#include <utility>

namespace redlockd::sim {
namespace {

constexpr int max_call_args = 64;

// Writes a command's reply as Lua values, as Redis converts them: integer -> number, bulk ->
// string, nil -> false, status -> {ok=...}, error -> {err=...}, array -> table.
class lua_writer final : public reply_writer {
 public:
  explicit lua_writer(lua_State* L) : L_(L) {}
  void integer(std::int64_t value) override {
    lua_pushnumber(L_, static_cast<lua_Number>(value));
    completed();
  }
  void bulk(std::string_view text) override {
    lua_pushlstring(L_, text.data(), text.size());
    completed();
  }
  void nil() override {
    lua_pushboolean(L_, 0);
    completed();
  }
  void status(std::string_view text) override { field_table("ok", text); }
  void error(std::string_view text) override {
    if (depth_ == 0)
      top_error_ = true;
    field_table("err", text);
  }
  void array(std::size_t elements) override {
    lua_createtable(L_, static_cast<int>(elements), 0);
    if (elements == 0 || depth_ == max_depth) {
      completed();
      return;
    }
    frames_[depth_++] = {elements, 1};
  }
  bool top_error() const { return top_error_; }

 private:
  void field_table(const char* name, std::string_view text) {
    lua_createtable(L_, 0, 1);
    lua_pushlstring(L_, text.data(), text.size());
    lua_setfield(L_, -2, name);
    completed();
  }
  // The value on top is complete: it goes into the array being filled, which may complete too.
  void completed() {
    while (depth_ > 0) {
      frame& f = frames_[depth_ - 1];
      lua_rawseti(L_, -2, static_cast<int>(f.next++));
      if (--f.left > 0)
        return;
      --depth_;
    }
  }

  static constexpr int max_depth = 8;
  struct frame {
    std::size_t left;
    std::size_t next;
  };
  lua_State* L_;
  std::array<frame, max_depth> frames_{};
  int depth_ = 0;
  bool top_error_ = false;
};

// The value at the top of the stack as a script's reply, as Redis converts it.
void emit(lua_State* L, reply_writer& out, int depth = 0) {
  switch (lua_type(L, -1)) {
  case LUA_TSTRING: {
    std::size_t size = 0;
    const char* text = lua_tolstring(L, -1, &size);
    out.bulk({text, size});
    return;
  }
  case LUA_TNUMBER:
    out.integer(static_cast<std::int64_t>(lua_tonumber(L, -1)));
    return;
  case LUA_TBOOLEAN:
    if (lua_toboolean(L, -1))
      out.integer(1);
    else
      out.nil();
    return;
  case LUA_TTABLE: {
    lua_getfield(L, -1, "err");
    if (lua_type(L, -1) == LUA_TSTRING) {
      out.error(lua_tostring(L, -1));
      lua_pop(L, 1);
      return;
    }
    lua_pop(L, 1);
    lua_getfield(L, -1, "ok");
    if (lua_type(L, -1) == LUA_TSTRING) {
      out.status(lua_tostring(L, -1));
      lua_pop(L, 1);
      return;
    }
    lua_pop(L, 1);
    std::size_t size = 0; // up to the first nil, as Redis reads an array
    for (;;) {
      lua_rawgeti(L, -1, static_cast<int>(size + 1));
      const bool end = lua_isnil(L, -1);
      lua_pop(L, 1);
      if (end)
        break;
      ++size;
    }
    out.array(size);
    for (std::size_t i = 1; i <= size; ++i) {
      lua_rawgeti(L, -1, static_cast<int>(i));
      if (depth < 8)
        emit(L, out, depth + 1);
      else
        out.nil();
      lua_pop(L, 1);
    }
    return;
  }
  default:
    out.nil();
    return;
  }
}

void push_error_table(lua_State* L, const char* text) {
  lua_createtable(L, 0, 1);
  lua_pushstring(L, text);
  lua_setfield(L, -2, "err");
}

int redis_error_reply(lua_State* L) {
  push_error_table(L, luaL_checkstring(L, 1));
  return 1;
}

int redis_status_reply(lua_State* L) {
  lua_createtable(L, 0, 1);
  lua_pushstring(L, luaL_checkstring(L, 1));
  lua_setfield(L, -2, "ok");
  return 1;
}

// Redis 7 refuses to read or create undeclared globals in scripts.
constexpr const char* protect_globals = R"lua(
setmetatable(_G, {
  __index = function(_, name)
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end,
  __newindex = function(_, name)
    error("Script attempted to create global variable '" .. tostring(name) .. "'", 2)
  end,
})
)lua";

} // namespace

// Lua allocates through one function; most of what scripts allocate are small strings, tables
// and closures that die at the end of the call. Blocks up to 256 bytes come from per-size free
// lists (16-byte classes, linked through the free blocks themselves) instead of malloc: the
// same objects, a fraction of the cost.
void* lua_engine::allocate(void* self, void* block, std::size_t old_size, std::size_t new_size) {
  auto& lists = static_cast<lua_engine*>(self)->free_blocks_;
  constexpr std::size_t granule = 16;
  const auto class_of = [&](std::size_t size) { return (size + granule - 1) / granule; };
  const auto give_back = [&](void* freed, std::size_t size) {
    auto* node = static_cast<free_block*>(freed);
    node->next = lists[class_of(size)];
    lists[class_of(size)] = node;
  };
  const bool small_old = block != nullptr && old_size <= small_block;
  if (new_size == 0) {
    if (small_old)
      give_back(block, old_size);
    else
      std::free(block);
    return nullptr;
  }
  if (new_size <= small_block) {
    if (small_old && class_of(old_size) == class_of(new_size))
      return block;
    free_block*& list = lists[class_of(new_size)];
    void* fresh = list;
    if (list != nullptr) {
      list = list->next;
    } else {
      fresh = std::malloc(class_of(new_size) * granule);
      if (fresh == nullptr)
        return nullptr;
    }
    if (block != nullptr) {
      std::memcpy(fresh, block, std::min(old_size, new_size));
      allocate(self, block, old_size, 0);
    }
    return fresh;
  }
  if (small_old) {
    void* fresh = std::malloc(new_size);
    if (fresh == nullptr)
      return nullptr;
    std::memcpy(fresh, block, old_size);
    give_back(block, old_size);
    return fresh;
  }
  return std::realloc(block, new_size);
}

lua_engine::lua_engine() : L_(lua_newstate(&lua_engine::allocate, this)) {
  if (L_ == nullptr)
    throw std::runtime_error("cannot create a Lua state");
  // The libraries redlockd's scripts may use, as Redis loads them (Redis adds cjson, struct,
  // cmsgpack and bit, which they do not use).
  const std::pair<lua_CFunction, const char*> libraries[] = {{luaopen_base, ""},
                                                             {luaopen_table, LUA_TABLIBNAME},
                                                             {luaopen_string, LUA_STRLIBNAME},
                                                             {luaopen_math, LUA_MATHLIBNAME}};
  for (const auto& [open, name] : libraries) {
    lua_pushcfunction(L_, open);
    lua_pushstring(L_, name);
    lua_call(L_, 1, 0);
  }
  lua_newtable(L_); // redis
  lua_pushlightuserdata(L_, this);
  lua_pushcclosure(L_, &lua_engine::redis_call, 1);
  lua_setfield(L_, -2, "call");
  lua_pushlightuserdata(L_, this);
  lua_pushcclosure(L_, &lua_engine::redis_pcall, 1);
  lua_setfield(L_, -2, "pcall");
  lua_pushcfunction(L_, redis_error_reply);
  lua_setfield(L_, -2, "error_reply");
  lua_pushcfunction(L_, redis_status_reply);
  lua_setfield(L_, -2, "status_reply");
  lua_setglobal(L_, "redis");
  // KEYS and ARGV: one table each, refilled before every call (nothing of a call outlives it).
  lua_newtable(L_);
  lua_pushvalue(L_, -1);
  keys_ref_ = luaL_ref(L_, LUA_REGISTRYINDEX);
  lua_setglobal(L_, "KEYS");
  lua_newtable(L_);
  lua_pushvalue(L_, -1);
  argv_ref_ = luaL_ref(L_, LUA_REGISTRYINDEX);
  lua_setglobal(L_, "ARGV");
  if (luaL_dostring(L_, protect_globals) != 0)
    throw std::runtime_error("cannot protect the Lua globals");
  // Scripts allocate a few short strings and closures per call and keep nothing: one full
  // collection every few thousand calls (run()) costs less than the incremental collector.
  lua_gc(L_, LUA_GCSTOP, 0);
}

lua_engine::~lua_engine() {
  lua_close(L_);
  for (free_block* list : free_blocks_)
    while (list != nullptr) {
      free_block* next = list->next;
      std::free(list);
      list = next;
    }
}

int lua_engine::find(std::string_view sha) const {
  const auto it = by_sha_.find(sha);
  return it == by_sha_.end() ? -1 : it->second;
}

int lua_engine::load(std::string_view source, std::string& error) {
  // Every master of a run loads the same texts, again after each restart: a text seen before
  // is known by its bytes, without a SHA-1.
  if (const auto it = by_text_.find(source); it != by_text_.end())
    return it->second;
  std::string sha = sha1_hex(source);
  if (const int known = find(sha); known >= 0)
    return known;
  std::string weakened;
  if (!rewrite_from_.empty()) {
    weakened.assign(source);
    for (std::size_t at = weakened.find(rewrite_from_); at != std::string::npos;
         at = weakened.find(rewrite_from_, at + rewrite_to_.size()))
      weakened.replace(at, rewrite_from_.size(), rewrite_to_);
  }
  const std::string_view text = rewrite_from_.empty() ? source : std::string_view(weakened);
  if (luaL_loadbuffer(L_, text.data(), text.size(), "@user_script") != 0) {
    error = "ERR Error compiling script (new function): ";
    error += lua_tostring(L_, -1);
    lua_pop(L_, 1);
    return -1;
  }
  const int index = static_cast<int>(shas_.size());
  functions_.push_back(luaL_ref(L_, LUA_REGISTRYINDEX));
  by_sha_.emplace(sha, index);
  by_text_.emplace(std::string(source), index);
  shas_.push_back(std::move(sha));
  return index;
}

void lua_engine::set_array(int table_ref, std::span<const std::string_view> values,
                           int& previous_size) {
  lua_rawgeti(L_, LUA_REGISTRYINDEX, table_ref);
  const int size = static_cast<int>(values.size());
  for (int i = 0; i < size; ++i) {
    lua_pushlstring(L_, values[static_cast<std::size_t>(i)].data(),
                    values[static_cast<std::size_t>(i)].size());
    lua_rawseti(L_, -2, i + 1);
  }
  for (int i = size; i < previous_size; ++i) {
    lua_pushnil(L_);
    lua_rawseti(L_, -2, i + 1);
  }
  previous_size = size;
  lua_pop(L_, 1);
}

void lua_engine::run(int script, std::span<const std::string_view> keys,
                     std::span<const std::string_view> args, command_context& ctx,
                     reply_writer& out) {
  set_array(keys_ref_, keys, keys_size_);
  set_array(argv_ref_, args, argv_size_);
  current_ = &ctx;
  lua_rawgeti(L_, LUA_REGISTRYINDEX, functions_[static_cast<std::size_t>(script)]);
  const int status = lua_pcall(L_, 0, 1, 0);
  current_ = nullptr;
  if (++calls_since_collect_ == 4096) {
    calls_since_collect_ = 0;
    lua_gc(L_, LUA_GCCOLLECT, 0);
  }
  if (status == 0) {
    emit(L_, out);
  } else if (lua_istable(L_, -1)) {
    lua_getfield(L_, -1, "err"); // an error redis.call raised: its reply
    out.error(lua_isstring(L_, -1) ? lua_tostring(L_, -1) : "ERR script error");
    lua_pop(L_, 1);
  } else {
    std::string text = "ERR ";
    text += lua_isstring(L_, -1) ? lua_tostring(L_, -1) : "script error";
    out.error(text);
  }
  lua_pop(L_, 1);
}

int lua_engine::redis_call(lua_State* L) {
  return call_command(L, true);
}

int lua_engine::redis_pcall(lua_State* L) {
  return call_command(L, false);
}

int lua_engine::call_command(lua_State* L, bool raise) {
  auto* self = static_cast<lua_engine*>(lua_touserdata(L, lua_upvalueindex(1)));
  const int argc = lua_gettop(L);
  const char* refusal = nullptr;
  if (argc == 0)
    refusal = "ERR Please specify at least one argument for this redis lib call";
  else if (argc > max_call_args)
    refusal = "ERR Too many arguments for this redis lib call";
  else if (self->current_ == nullptr)
    refusal = "ERR redis.call outside of a script";
  std::array<std::string_view, max_call_args> argv;
  // Numbers are formatted as Redis formats them (%.17g), not as Lua's tostring does.
  std::array<std::array<char, 32>, 16> numbers;
  std::size_t numbers_used = 0;
  for (int i = 1; refusal == nullptr && i <= argc; ++i) {
    const int type = lua_type(L, i);
    if (type == LUA_TNUMBER && numbers_used < numbers.size()) {
      auto& buffer = numbers[numbers_used++];
      const lua_Number number = lua_tonumber(L, i);
      // An integer below 2^53 prints the same digits under %.17g: to_chars is several times
      // cheaper (-0 keeps its sign only through snprintf).
      std::size_t size = 0;
      if (number == std::trunc(number) && std::fabs(number) < 9007199254740992.0 &&
          !(number == 0 && std::signbit(number))) {
        size = static_cast<std::size_t>(std::to_chars(buffer.data(), buffer.data() + buffer.size(),
                                                      static_cast<std::int64_t>(number))
                                            .ptr -
                                        buffer.data());
      } else {
        size =
            static_cast<std::size_t>(std::snprintf(buffer.data(), buffer.size(), "%.17g", number));
      }
      argv[static_cast<std::size_t>(i - 1)] = {buffer.data(), size};
    } else if (type == LUA_TSTRING || type == LUA_TNUMBER) {
      std::size_t size = 0;
      const char* text = lua_tolstring(L, i, &size);
      argv[static_cast<std::size_t>(i - 1)] = {text, size};
    } else {
      refusal = "ERR Lua redis lib command arguments must be strings or integers";
    }
  }
  if (refusal != nullptr) {
    push_error_table(L, refusal);
    return raise ? lua_error(L) : 1;
  }
  lua_writer out(L);
  run_command(*self->current_, {argv.data(), static_cast<std::size_t>(argc)}, out);
  if (out.top_error() && raise)
    return lua_error(L); // the {err=...} table is on top, as Redis 7 raises it
  return 1;
}

} // namespace redlockd::sim
