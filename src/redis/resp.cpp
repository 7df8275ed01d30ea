#include "redis/resp.hpp"

#include <new>
#include <vector>

namespace sluice::redis {
namespace {

struct command_deleter {
  void operator()(char* p) const noexcept { redisFreeCommand(p); }
};

}  // namespace

void append_command(std::string& out, const std::string_view* args, std::size_t count) {
  // Small fixed arrays cover every command Sluice sends; larger lists use the heap.
  constexpr std::size_t inline_args = 16;
  const char* argv_inline[inline_args];
  std::size_t len_inline[inline_args];
  std::vector<const char*> argv_heap;
  std::vector<std::size_t> len_heap;
  const char** argv = argv_inline;
  std::size_t* lens = len_inline;
  if (count > inline_args) {
    argv_heap.resize(count);
    len_heap.resize(count);
    argv = argv_heap.data();
    lens = len_heap.data();
  }
  for (std::size_t i = 0; i < count; ++i) {
    argv[i] = args[i].data();
    lens[i] = args[i].size();
  }
  char* raw = nullptr;
  const int n = redisFormatCommandArgv(&raw, static_cast<int>(count), argv, lens);
  std::unique_ptr<char, command_deleter> cmd(raw);
  if (n < 0 || !cmd) throw std::bad_alloc();
  out.append(cmd.get(), static_cast<std::size_t>(n));
}

void append_command(std::string& out, std::initializer_list<std::string_view> args) {
  append_command(out, args.begin(), args.size());
}

std::string_view reply_text(const redisReply& r) noexcept {
  switch (r.type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      return {r.str, r.len};
    default:
      return {};
  }
}

bool is_error(const redisReply& r, std::string_view prefix) noexcept {
  return r.type == REDIS_REPLY_ERROR && reply_text(r).starts_with(prefix);
}

// hiredis's own reply objects (freeReplyObject frees them), except that an array longer
// than reply_reader::max_array_elements is refused before it is allocated.
struct bounded_reply_functions {
  static const redisReplyObjectFunctions& hiredis() {
    // hiredis keeps its default functions private; a default reader points at them.
    static const redisReplyObjectFunctions fns = [] {
      std::unique_ptr<redisReader, void (*)(redisReader*)> r(redisReaderCreate(), redisReaderFree);
      if (!r) throw std::bad_alloc();
      return *r->fn;
    }();
    return fns;
  }

  static void* create_array(const redisReadTask* task, int elements) {
    if (elements < 0 || elements > reply_reader::max_array_elements) {
      // hiredis reports a null object as a protocol error ("Out of memory"); say why.
      static_cast<reply_reader*>(task->privdata)->array_too_long_ = true;
      return nullptr;
    }
    return hiredis().createArray(task, elements);
  }

  static redisReplyObjectFunctions* get() {
    static redisReplyObjectFunctions fns = [] {
      auto f = hiredis();
      f.createArray = create_array;
      return f;
    }();
    return &fns;
  }
};

reply_reader::reply_reader()
    : reader_(redisReaderCreateWithFunctions(bounded_reply_functions::get())) {
  if (!reader_) throw std::bad_alloc();
  // Every read task gets this as its privdata.
  reader_->privdata = this;
}

bool reply_reader::feed(const char* data, std::size_t size) noexcept {
  return redisReaderFeed(reader_.get(), data, size) == REDIS_OK;
}

reply_reader::status reply_reader::next(reply_ptr& out) noexcept {
  void* raw = nullptr;
  if (redisReaderGetReply(reader_.get(), &raw) != REDIS_OK) return status::protocol_error;
  if (!raw) return status::incomplete;
  out.reset(static_cast<redisReply*>(raw));
  return status::reply;
}

std::string_view reply_reader::error_text() const noexcept {
  if (array_too_long_)
    return "an array reply announces more elements than any reply sluice asks for";
  return reader_->errstr;
}

}  // namespace sluice::redis
