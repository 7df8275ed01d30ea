#pragma once
/// Everything a user of the library needs.
#include <sluice/backend.hpp>
#include <sluice/backend_url.hpp>
#include <sluice/clock.hpp>
#include <sluice/completion.hpp>
#include <sluice/concurrency.hpp>
#include <sluice/decision.hpp>
#include <sluice/error.hpp>
#include <sluice/limiter.hpp>
#include <sluice/log.hpp>
#include <sluice/memory_backend.hpp>
#include <sluice/policy.hpp>
#include <sluice/redis_backend.hpp>
#include <sluice/redis_cluster.hpp>
#include <sluice/redis_sentinel.hpp>
#include <sluice/version.hpp>
