#include "redis/address_source.hpp"

#include <utility>

namespace sluice::redis {
namespace {

class fixed final : public address_source {
 public:
  explicit fixed(server_address a) : a_(std::move(a)) {}
  void start(moved_handler) override {}
  void resolve(resolve_handler done) override { done(a_); }
  void pointed_at(const server_address& a) override { a_ = a; }

 private:
  server_address a_;  // I/O thread only
};

}  // namespace

std::shared_ptr<address_source> fixed_address(server_address a) {
  return std::make_shared<fixed>(std::move(a));
}

}  // namespace sluice::redis
