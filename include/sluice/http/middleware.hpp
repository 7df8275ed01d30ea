#pragma once
/// The framework-agnostic HTTP middleware core: everything except the adapters
/// (<sluice/http/beast.hpp>, <sluice/http/httplib.hpp>).
#include <sluice/http/address.hpp>
#include <sluice/http/client_ip.hpp>
#include <sluice/http/concurrency_gate.hpp>
#include <sluice/http/evaluate.hpp>
#include <sluice/http/headers.hpp>
#include <sluice/http/key_spec.hpp>
#include <sluice/http/request.hpp>
#include <sluice/http/rules.hpp>
