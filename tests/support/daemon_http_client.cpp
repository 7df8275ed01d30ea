#include "support/daemon_http_client.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace sluice::test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {
std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
}  // namespace

std::string http_reply::header(const std::string& name) const {
  auto it = headers.find(lower(name));
  return it == headers.end() ? std::string() : it->second;
}

bool http_reply::has_header(const std::string& name) const {
  return headers.find(lower(name)) != headers.end();
}

// Async operations run to completion on a private io_context, so tcp_stream's timeout
// applies (blocking Beast calls ignore it).
struct http_connection::impl {
  asio::io_context ioc;
  beast::tcp_stream stream{ioc};
  beast::flat_buffer buffer;
  std::chrono::milliseconds timeout;

  template <class Op>
  void run(Op op, const char* what) {
    beast::error_code result;
    bool done = false;
    stream.expires_after(timeout);
    op([&](beast::error_code ec, std::size_t = 0) {
      result = ec;
      done = true;
    });
    ioc.restart();
    ioc.run();
    if (!done) throw std::runtime_error(std::string(what) + ": did not complete");
    if (result) throw std::runtime_error(std::string(what) + ": " + result.message());
  }

  // `head`: the reply to a HEAD request, whose Content-Length describes a body not sent.
  http_reply read_reply(bool head = false) {
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    parser.skip(head);
    run([&](auto h) { bhttp::async_read(stream, buffer, parser, h); }, "read");
    auto res = parser.release();
    http_reply r;
    r.status = static_cast<int>(res.result_int());
    for (const auto& f : res) {
      r.headers.emplace(lower(std::string(f.name_string())), std::string(f.value()));
    }
    r.body = std::move(res.body());
    return r;
  }
};

http_connection::http_connection(std::uint16_t port, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<impl>()) {
  impl_->timeout = timeout;
  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), port);
  impl_->run(
      [&](auto h) {
        impl_->stream.async_connect(ep, [h](beast::error_code ec) mutable { h(ec); });
      },
      "connect");
}

http_connection::~http_connection() = default;

http_reply http_connection::request(const std::string& method, const std::string& target,
                                    const std::string& body, const header_list& headers) {
  bhttp::request<bhttp::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  req.set(bhttp::field::host, "127.0.0.1");
  for (const auto& [n, v] : headers) req.insert(n, v);
  req.body() = body;
  if (!body.empty() || method == "POST" || method == "PUT") req.prepare_payload();
  req.keep_alive(true);
  impl_->run([&](auto h) { bhttp::async_write(impl_->stream, req, h); }, "write");
  return impl_->read_reply(method == "HEAD");
}

http_reply http_connection::raw(const std::string& bytes) {
  impl_->run([&](auto h) { asio::async_write(impl_->stream, asio::buffer(bytes), h); }, "write");
  return impl_->read_reply();
}

bool http_connection::closed_by_peer(std::chrono::milliseconds within) {
  char c;
  beast::error_code result;
  bool done = false;
  impl_->stream.expires_after(within);
  impl_->stream.async_read_some(asio::buffer(&c, 1), [&](beast::error_code ec, std::size_t) {
    result = ec;
    done = true;
  });
  impl_->ioc.restart();
  impl_->ioc.run();
  return done && (result == asio::error::eof || result == asio::error::connection_reset);
}

http_reply http_request(std::uint16_t port, const std::string& method, const std::string& target,
                        const std::string& body, const header_list& headers) {
  http_connection c(port);
  return c.request(method, target, body, headers);
}

http_reply post_check(std::uint16_t port, const std::string& json_body) {
  return http_request(port, "POST", "/v1/check", json_body, {{"Content-Type", "application/json"}});
}

bool port_accepts(std::uint16_t port) {
  try {
    http_connection c(port, std::chrono::milliseconds{500});
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace sluice::test
