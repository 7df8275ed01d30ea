#!/usr/bin/env bash
# Writes docs/BENCHMARKS.md (to stdout) from the figures scripts/bench measured.
#   report.sh WORKDIR MACHINE VERSIONS LOADAVG QUICK COMMAND < figures.tsv   (name<TAB>value lines)
set -euo pipefail
machine="$2" versions="$3" load="$4" quick="$5" command_line="$6"
declare -A F
while IFS=$'\t' read -r k v; do F[$k]="$v"; done

f() { echo "${F[$1]:-n/a}"; }
# Ratio a/b with two decimals, or n/a.
ratio() {
  awk -v a="${F[$1]:-}" -v b="${F[$2]:-}" 'BEGIN {
    if (a == "" || b == "" || a == "n/a" || b == "n/a" || b + 0 == 0) print "n/a"; else printf "%.2f", a / b }'
}
# "met" / "NOT met" for value OP bound.
verdict() {
  awk -v v="$1" -v op="$2" -v b="$3" 'BEGIN {
    if (v == "n/a" || v == "") { print "not measured"; exit }
    ok = (op == ">=") ? (v + 0 >= b + 0) : (v + 0 <= b + 0)
    print ok ? "**met**" : "**NOT met**" }'
}
# The open loop's p99 against BOUND us: calls it gave up sending (unsent) had waited longer
# than the window, so any of them means the rate was not served and the target not met.
open_verdict() {  # open_verdict NAME BOUND
  local unsent="${F[$1.unsent]:-0}"
  if [ "$unsent" != 0 ]; then
    echo "**NOT met** ($unsent calls never sent)"
  else
    verdict "${F[$1.p99_us]:-n/a}" "<=" "$2"
  fi
}
k() { awk -v v="${F[$1]:-}" 'BEGIN { if (v == "" || v == "n/a") print "n/a"; else printf "%.0f", v }'; }
m() { awk -v v="${F[$1]:-}" 'BEGIN { if (v == "" || v == "n/a") print "n/a"; else printf "%.2fM", v / 1e6 }'; }

# The median over three paired rounds of a/b (see scripts/bench), with the rounds' ratios:
# rounds named pair<i>_ (section b) or, with a third argument, <prefix><i>_ (g: section g).
paired() {  # paired A_SUFFIX B_SUFFIX [PREFIX] -> "median (r1, r2, r3)"
  local rs=() r prefix="${3:-pair}"
  for i in 1 2 3; do
    r="$(ratio "${prefix}${i}_$1" "${prefix}${i}_$2")"
    [ "$r" != n/a ] && rs+=("$r")
  done
  [ ${#rs[@]} -eq 0 ] && { echo "n/a"; return; }
  printf '%s\n' "${rs[@]}" | sort -g | awk '{ v[NR] = $1 } END { printf "%s", v[int((NR + 1) / 2)] }'
  printf ' (rounds: %s)' "$(IFS=,; echo "${rs[*]}" | sed 's/,/, /g')"
}
g_check="$(paired check_redis_c50.per_sec check_memory_c50.per_sec g)"
g_redis_cpu="$(paired check_redis_c50.redis_us_per_decision ref_P16.cpu_us_per_call g)"
g_rls_cpu_mem="$(paired rls_memory_d1_c50.server_us check_memory_c50.server_us g)"
g_rls_cpu_redis="$(paired rls_redis_d1_c50.server_us check_redis_c50.server_us g)"
g_h2_mem="$(paired rls_memory_h2load_c50.per_sec check_memory_c50.per_sec g)"
g_h2_redis="$(paired rls_redis_h2load_c50.per_sec check_redis_c50.per_sec g)"
h_lib="$(paired lib_lease.decisions_per_s lib_plain.decisions_per_s h)"
h_hot="$(paired hot_redis.per_sec hot_memory.per_sec h)"
h_rls_hot="$(paired rlshot_redis.per_sec rlshot_memory.per_sec h)"
# The median of three rounds' single figures (not a ratio).
median3() {  # median3 SUFFIX PREFIX
  local vs=() v
  for i in 1 2 3; do
    v="${F[${2}${i}_$1]:-}"
    [ -n "$v" ] && [ "$v" != n/a ] && vs+=("$v")
  done
  [ ${#vs[@]} -eq 0 ] && { echo "n/a"; return; }
  printf '%s\n' "${vs[@]}" | sort -g | awk '{ v[NR] = $1 } END { printf "%s", v[int((NR + 1) / 2)] }'
}
h_lib_rate="$(median3 lib_lease.decisions_per_s h)"
h_lib_calls="$(median3 lib_lease.calls_per_1000 h)"
# Issue 34 (section i): medians of three rounds.
i_pairs="$(median3 mem_pairs_k1.per_sec i)"
i_pairs_cpu="$(median3 mem_pairs_k1.per_cpu_sec i)"
i_pairs10k="$(median3 mem_pairs_k10000.per_sec i)"
i_check="$(median3 mem_check_k1.per_sec i)"
i_vs_check="$(paired mem_pairs_k1.per_sec mem_check_k1.per_sec i)"
for m in run_on own_thread; do
  for v in acquire_p50_us acquire_p99_us acquire_p999_us release_p50_us release_p99_us \
    release_p999_us pair_p50_us pair_p99_us pair_p999_us pairs_per_s; do
    declare "i_${m}_${v}=$(median3 "slots_${m}.${v}" i)"
  done
done
i_rb_p50="$(median3 rb_ref_c200_P1.p50_us i)"
i_rb_p99="$(median3 rb_ref_c200_P1.p99_us i)"
lib50_vs_p16="$(ratio lib_async_50.per_sec rb_ref_c50_P16.per_sec)"
pair_tput="$(paired lib_50.per_sec ref_P16.per_sec)"
pair_p50="$(paired lib_1.p50_us ref_c1.p50_us)"
pair_loop_tput="$(paired loop_50.per_sec ref_P16.per_sec)"
pair_loop_p50="$(paired loop_1.p50_us ref_c1.p50_us)"
loop50_vs_p16="$(ratio lib_loop_50.per_sec rb_ref_c50_P16.per_sec)"
loop500_vs_p16="$(ratio lib_loop_500.per_sec rb_ref_c50_P16.per_sec)"
cpu_loop_vs_p16="$(ratio lib_loop_50.cpu_us_per_decision rb_ref_c50_P16.cpu_us_per_call)"
p50_threads="$(ratio lib_threads_1.p50_us rb_ref_c1_P1.p50_us)"
p50_async="$(ratio lib_async_1.p50_us rb_ref_c1_P1.p50_us)"
cpu_script="$(ratio rb_sluice_c50_P16.cpu_us_per_call rb_ref_c50_P16.cpu_us_per_call)"
usec_script="$(ratio rb_sluice_c50_P16.usec_per_call rb_ref_c50_P16.usec_per_call)"
cpu_lib_vs_p1="$(ratio lib_async_50.cpu_us_per_decision rb_ref_c50_P1.cpu_us_per_call)"
cpu_lib_vs_p16="$(ratio lib_async_50.cpu_us_per_decision rb_ref_c50_P16.cpu_us_per_call)"
cpu_batch16="$(ratio var_batch16.cpu_us_per_decision var_reference.cpu_us_per_decision)"
bytes="$(ratio mem_sluice.bytes_per_key mem_ref.bytes_per_key)"
bytes_floor="$(ratio mem_floor.bytes_per_key mem_ref.bytes_per_key)"
daemon50="$(ratio sluiced_mem_c50.per_sec nginx_c50.per_sec)"
rls_mem50="$(ratio rls_memory_d1_c50.per_sec rlsref_memory_c50.per_sec)"
rls_redis50="$(ratio rls_redis_d1_c50.per_sec rlsref_redis_c50.per_sec)"
rls_grpc_mem50="$(ratio rls_memory_grpc_d1_c50.per_sec rlsref_memory_c50.per_sec)"
rls_grpc_redis50="$(ratio rls_redis_grpc_d1_c50.per_sec rlsref_redis_c50.per_sec)"
rls_h2_mem50="$(ratio rls_memory_h2load_c50.per_sec rlsref_memory_c50.per_sec)"
rls_h2_redis50="$(ratio rls_redis_h2load_c50.per_sec rlsref_redis_c50.per_sec)"

cat <<EOF
# Sluice benchmarks

Written by \`scripts/bench\` from one run; every figure below comes from that run, and the
raw output of each tool is in [docs/bench/raw/](bench/raw/). Numbers move from run to run on
a shared machine; the **ratios within one run** are what the targets of issue 4 are about.
$( [ "$quick" = 1 ] && echo "
> **This is a --quick run**: short runs, a smoke test of the script, not numbers to keep." )

- Command: \`${command_line}\` (\`scripts/bench\` alone builds with \`scripts/build --preset release\` first; \`--no-build\` uses that build as it is)
- Machine: $machine
- Software: $versions; Release build (g++ -O3 via CMake Release)
- Load average at the end of the run: $load (the machine is shared: builds running beside the
  benchmark take CPU from it and from Redis alike)
- Redis: its own \`redis-server\` on a free loopback port, no persistence; 10k keys
  (\`bucket:__rand_int__\` with \`-r 10000\` for redis-benchmark, \`k:0..9999\` for the library)
- Limit everywhere: capacity 100, refill 100/s, cost 1 (nearly every check is admitted, the
  path that writes)

## Targets (issue 4)

| Target | Measured | Ratio | Verdict |
|---|---|---|---|
| Library at 50 callers >= 1.5x redis-benchmark -c 50 -P 16 EVALSHA of the reference: median of 3 back-to-back rounds | | ${pair_tput%% *}x ${pair_tput#* } | $(verdict "${pair_tput%% *}" ">=" 1.5) |
| (same, the single measurements of sections a and b) | $(k lib_async_50.per_sec)/s vs $(k rb_ref_c50_P16.per_sec)/s | ${lib50_vs_p16}x | $(verdict "$lib50_vs_p16" ">=" 1.5) |
| (same, the backend on the callers' io_context, \`redis_options::run_on\`: median of 3 back-to-back rounds) | | ${pair_loop_tput%% *}x ${pair_loop_tput#* } | $(verdict "${pair_loop_tput%% *}" ">=" 1.5) |
| (same, run_on, single measurements; and at 500 callers) | $(k lib_loop_50.per_sec)/s, 500: $(k lib_loop_500.per_sec)/s vs $(k rb_ref_c50_P16.per_sec)/s | ${loop50_vs_p16}x, 500: ${loop500_vs_p16}x | $(verdict "$loop50_vs_p16" ">=" 1.5) |
| Single-caller p50 within 1.2x of redis-benchmark -c 1 EVALSHA of the reference (blocking \`check\`): median of 3 back-to-back rounds | | ${pair_p50%% *}x ${pair_p50#* } | $(verdict "${pair_p50%% *}" "<=" 1.2) |
| (same, the single measurements of sections a and b) | $(f lib_threads_1.p50_us) us vs $(f rb_ref_c1_P1.p50_us) us | ${p50_threads}x | $(verdict "$p50_threads" "<=" 1.2) |
| (same, one \`async_check\` chain) | $(f lib_async_1.p50_us) us vs $(f rb_ref_c1_P1.p50_us) us | ${p50_async}x | $(verdict "$p50_async" "<=" 1.2) |
| (same, one \`async_check\` chain with run_on: median of 3 back-to-back rounds) | | ${pair_loop_p50%% *}x ${pair_loop_p50#* } | $(verdict "${pair_loop_p50%% *}" "<=" 1.2) |
| Redis CPU per decision <= 0.5x the reference: the library as used (50 callers, batched, INFO cpu / checks) vs the reference under redis-benchmark -c 50 -P 16 | $(f lib_async_50.cpu_us_per_decision) us vs $(f rb_ref_c50_P16.cpu_us_per_call) us | ${cpu_lib_vs_p16}x | $(verdict "$cpu_lib_vs_p16" "<=" 0.5) |
| (same, run_on, 50 callers) | $(f lib_loop_50.cpu_us_per_decision) us vs $(f rb_ref_c50_P16.cpu_us_per_call) us | ${cpu_loop_vs_p16}x | $(verdict "$cpu_loop_vs_p16" "<=" 0.5) |
| (same, script for script: lua/decide_batch.lua with 16 keys per call vs the reference, both under redis-benchmark -c 50 -P 16) | $(f var_batch16.cpu_us_per_decision) us vs $(f var_reference.cpu_us_per_decision) us | ${cpu_batch16}x | $(verdict "$cpu_batch16" "<=" 0.5) |
| (same, the single-key lua/decide.lua, which a lone check uses) | $(f rb_sluice_c50_P16.cpu_us_per_call) us vs $(f rb_ref_c50_P16.cpu_us_per_call) us | ${cpu_script}x | $(verdict "$cpu_script" "<=" 0.5) |
| (same, commandstats usec_per_call of EVALSHA, single-key script) | $(f rb_sluice_c50_P16.usec_per_call) us vs $(f rb_ref_c50_P16.usec_per_call) us | ${usec_script}x | $(verdict "$usec_script" "<=" 0.5) |
| (the library as used vs the reference unpipelined -P 1) | $(f lib_async_50.cpu_us_per_decision) us vs $(f rb_ref_c50_P1.cpu_us_per_call) us | ${cpu_lib_vs_p1}x | $(verdict "$cpu_lib_vs_p1" "<=" 0.5) |
| Redis bytes per tracked key <= 0.6x the reference ($(f mem_ref.keys) keys) | $(f mem_sluice.bytes_per_key) B vs $(f mem_ref.bytes_per_key) B | ${bytes}x | $(verdict "$bytes" "<=" 0.6) |
| (the floor of any layout with one key and one TTL per client: a key whose value takes no memory, section c) | $(f mem_floor.bytes_per_key) B vs $(f mem_ref.bytes_per_key) B | ${bytes_floor}x | $(awk -v v="$bytes_floor" 'BEGIN { if (v == "n/a") print "not measured"; else if (v + 0 > 0.6) print "above 0.6x: the target is out of reach of any such layout"; else print "below 0.6x" }') |
| Memory backend >= 10M/s, one thread, 10k keys (steady_clock, the default) | $(m mem_10000_steady_t1.per_sec)/s | | $(verdict "${F[mem_10000_steady_t1.per_sec]:-n/a}" ">=" 10000000) |
| (same, cheap ticking clock) | $(m mem_10000_ticking_t1.per_sec)/s | | $(verdict "${F[mem_10000_ticking_t1.per_sec]:-n/a}" ">=" 10000000) |
| Memory backend >= 3M/s, one thread, 1M keys (steady_clock) | $(m mem_1000000_steady_t1.per_sec)/s | | $(verdict "${F[mem_1000000_steady_t1.per_sec]:-n/a}" ">=" 3000000) |
| (same, cheap ticking clock) | $(m mem_1000000_ticking_t1.per_sec)/s | | $(verdict "${F[mem_1000000_ticking_t1.per_sec]:-n/a}" ">=" 3000000) |
| sluiced (memory) >= 0.7x nginx \`return 204\`, wrk 50 connections | $(k sluiced_mem_c50.per_sec)/s vs $(k nginx_c50.per_sec)/s | ${daemon50}x | $(verdict "$daemon50" ">=" 0.7) |

## Targets (issue 19: Envoy's rate limit service, section f)

| Target | Measured | Ratio | Verdict |
|---|---|---|---|
| ShouldRateLimit, one descriptor, 50 streams >= 0.8x \`POST /v1/check\` at 50 connections, memory | $(k rls_memory_d1_c50.per_sec)/s vs $(k rlsref_memory_c50.per_sec)/s | ${rls_mem50}x | $(verdict "$rls_mem50" ">=" 0.8) |
| (same, Redis) | $(k rls_redis_d1_c50.per_sec)/s vs $(k rlsref_redis_c50.per_sec)/s | ${rls_redis50}x | $(verdict "$rls_redis50" ">=" 0.8) |
| (same, memory, gRPC's C++ client) | $(k rls_memory_grpc_d1_c50.per_sec)/s vs $(k rlsref_memory_c50.per_sec)/s | ${rls_grpc_mem50}x | $(verdict "$rls_grpc_mem50" ">=" 0.8) |
| (same, Redis, gRPC's C++ client) | $(k rls_redis_grpc_d1_c50.per_sec)/s vs $(k rlsref_redis_c50.per_sec)/s | ${rls_grpc_redis50}x | $(verdict "$rls_grpc_redis50" ">=" 0.8) |
| (same, memory, h2load as the gRPC client) | $(k rls_memory_h2load_c50.per_sec)/s vs $(k rlsref_memory_c50.per_sec)/s | ${rls_h2_mem50}x | $(verdict "$rls_h2_mem50" ">=" 0.8) |
| (same, Redis, h2load as the gRPC client) | $(k rls_redis_h2load_c50.per_sec)/s vs $(k rlsref_redis_c50.per_sec)/s | ${rls_h2_redis50}x | $(verdict "$rls_h2_redis50" ">=" 0.8) |
| ShouldRateLimit p99 < 5 ms at 50 streams, memory (one / three descriptors) | $(f rls_memory_d1_c50.p99_us) us / $(f rls_memory_d3_c50.p99_us) us | | $(verdict "${F[rls_memory_d1_c50.p99_us]:-n/a}" "<=" 5000) / $(verdict "${F[rls_memory_d3_c50.p99_us]:-n/a}" "<=" 5000) |
| (same, Redis) | $(f rls_redis_d1_c50.p99_us) us / $(f rls_redis_d3_c50.p99_us) us | | $(verdict "${F[rls_redis_d1_c50.p99_us]:-n/a}" "<=" 5000) / $(verdict "${F[rls_redis_d3_c50.p99_us]:-n/a}" "<=" 5000) |
| ShouldRateLimit p99 under 5 ms at 50 streams, open loop at 10000 calls/s, memory (one descriptor; latency from each call's scheduled time) | $(f rls_memory_d1_c50_open10000.p99_us) us at $(k rls_memory_d1_c50_open10000.per_sec)/s of $(k rls_memory_d1_c50_open10000.rate)/s, $(f rls_memory_d1_c50_open10000.late) late | | $(open_verdict rls_memory_d1_c50_open10000 5000) |
| (same, Redis) | $(f rls_redis_d1_c50_open10000.p99_us) us at $(k rls_redis_d1_c50_open10000.per_sec)/s of $(k rls_redis_d1_c50_open10000.rate)/s, $(f rls_redis_d1_c50_open10000.late) late | | $(open_verdict rls_redis_d1_c50_open10000 5000) |

## Targets (issue 32: one async path, section g)

Two sluiced with their default settings, one on memory and one on Redis, measured in three
alternating rounds; each ratio is the median of the rounds' ratios (the rounds in brackets).

| Target | Ratio | Verdict |
|---|---|---|
| sluiced \`/v1/check\` on Redis >= 0.7x sluiced on memory (wrk -t2 -c50, 10k keys) | ${g_check%% *}x ${g_check#* } | $(verdict "${g_check%% *}" ">=" 0.7) |
| Redis CPU per decision through sluiced <= 0.5x the seed script's under redis-benchmark -c 50 -P 16 | ${g_redis_cpu%% *}x ${g_redis_cpu#* } | $(verdict "${g_redis_cpu%% *}" "<=" 0.5) |
| ShouldRateLimit: sluiced's CPU per call <= 1.25x a \`/v1/check\` deciding the same limit, memory | ${g_rls_cpu_mem%% *}x ${g_rls_cpu_mem#* } | $(verdict "${g_rls_cpu_mem%% *}" "<=" 1.25) |
| (same, Redis) | ${g_rls_cpu_redis%% *}x ${g_rls_cpu_redis#* } | $(verdict "${g_rls_cpu_redis%% *}" "<=" 1.25) |
| ShouldRateLimit calls/s under h2load (2 connections x 25 streams) >= 0.8x wrk's \`/v1/check\`, memory | ${g_h2_mem%% *}x ${g_h2_mem#* } | $(verdict "${g_h2_mem%% *}" ">=" 0.8) |
| (same, Redis) | ${g_h2_redis%% *}x ${g_h2_redis#* } | $(verdict "${g_h2_redis%% *}" ">=" 0.8) |
| The library (50 \`async_check\` chains, default options) >= 2x redis-benchmark -c 50 -P 16 EVALSHA of the seed script (section b's rounds) | ${pair_tput%% *}x ${pair_tput#* } | $(verdict "${pair_tput%% *}" ">=" 2) |

## Targets (issue 33: quota leases, section h)

One key shared by every caller. The library: 2 processes x 2 threads of \`sluice_bench_lease\`
(blocking \`check\`, default options) on one key whose limit (10,000 burst, 100,000/s) is far
below the demand, with \`lease_ttl\` 50 ms and without; sluiced: \`wrk -t2 -c50\` on one key
of a policy with \`lease_ttl: 50ms\`, on Redis and on memory. Three alternating rounds; medians.

| Target | Figure | Verdict |
|---|---|---|
| The library with leases >= 1,000,000 decisions/s across 2 processes | $h_lib_rate | $(verdict "$h_lib_rate" ">=" 1000000) |
| ... >= 5x the same program without leases | ${h_lib%% *}x ${h_lib#* } | $(verdict "${h_lib%% *}" ">=" 5) |
| ... <= 1 script call per 1,000 decisions | $h_lib_calls | $(verdict "$h_lib_calls" "<=" 1) |
| sluiced, one hot key on Redis with leases >= 0.95x sluiced on memory (wrk -t2 -c50) | ${h_hot%% *}x ${h_hot#* } | $(verdict "${h_hot%% *}" ">=" 0.95) |
| (same, ShouldRateLimit on one leased descriptor value, sluice_bench_rls 50 streams) | ${h_rls_hot%% *}x ${h_rls_hot#* } | $(verdict "${h_rls_hot%% *}" ">=" 0.95) |

## Targets (issue 34: concurrency limits, section i)

Memory: \`sluice_bench_slots\` (Google Benchmark), \`limiter::try_acquire\` then the slot's
\`release()\` on a default \`limiter::in_memory()\`, one thread, one key (limit 1000: every
acquire admitted), beside \`limiter::check\` on the same limiter. Redis: \`sluice_bench_slots_redis\`,
200 coroutines on one io_context, each \`async_try_acquire\` (1,000 keys), a hold uniform in
1..10 ms, \`async_release\`; latencies of each call and of the two summed, after 1 s of
warm-up. "one thread": the backend on the callers' io_context (\`redis_options::run_on\`);
"own I/O thread": the default. Beside it, redis-benchmark EVALSHA of the reference script at
-c 200 -P 1. Three rounds; medians.

| Target | Figure | Verdict |
|---|---|---|
| Memory: >= 5,000,000 acquire+release pairs/s on one thread | $i_pairs (per CPU second: $i_pairs_cpu; 10k keys: $i_pairs10k) | $(verdict "$i_pairs" ">=" 5000000) |
| ... beside \`check\` on one thread ($i_check/s) | ${i_vs_check%% *}x ${i_vs_check#* } | (reference) |
| Redis, 200 callers, one thread: acquire p99 < 1 ms | $i_run_on_acquire_p99_us us | $(verdict "$i_run_on_acquire_p99_us" "<=" 999) |
| ... release p99 < 1 ms | $i_run_on_release_p99_us us | $(verdict "$i_run_on_release_p99_us" "<=" 999) |
| ... acquire + release summed, p99 < 1 ms | $i_run_on_pair_p99_us us | $(verdict "$i_run_on_pair_p99_us" "<=" 999) |
| Redis, 200 callers, own I/O thread: acquire + release summed, p99 < 1 ms | $i_own_thread_pair_p99_us us | $(verdict "$i_own_thread_pair_p99_us" "<=" 999) |

| Redis, 200 callers | pairs/s | acquire p50 / p99 / p999 (us) | release p50 / p99 / p999 (us) | pair p50 / p99 / p999 (us) |
|---|---|---|---|---|
| one thread (run_on) | $i_run_on_pairs_per_s | $i_run_on_acquire_p50_us / $i_run_on_acquire_p99_us / $i_run_on_acquire_p999_us | $i_run_on_release_p50_us / $i_run_on_release_p99_us / $i_run_on_release_p999_us | $i_run_on_pair_p50_us / $i_run_on_pair_p99_us / $i_run_on_pair_p999_us |
| own I/O thread | $i_own_thread_pairs_per_s | $i_own_thread_acquire_p50_us / $i_own_thread_acquire_p99_us / $i_own_thread_acquire_p999_us | $i_own_thread_release_p50_us / $i_own_thread_release_p99_us / $i_own_thread_release_p999_us | $i_own_thread_pair_p50_us / $i_own_thread_pair_p99_us / $i_own_thread_pair_p999_us |
| redis-benchmark EVALSHA (reference script), -c 200 -P 1 | | p50 $i_rb_p50 / p99 $i_rb_p99 (one call) | | |

![throughput and p99 against concurrency](bench/concurrency.svg)

## (a) redis-benchmark EVALSHA: the reference script and Sluice's

\`redis-benchmark -c C -P P -r 10000 --csv evalsha SHA 1 bucket:__rand_int__ ARGS\`, after
\`FLUSHALL\`. The reference is [bench/reference_token_bucket.lua](../bench/reference_token_bucket.lua),
the seed post's script (TIME + HMGET + HSET + PEXPIRE on a hash; ARGV \`100 100 1\`); Sluice's is
[lua/decide.lua](../lua/decide.lua) (TIME + GET + SET PX on one string; ARGV in
micro-tokens \`100000000 100000 1000000\`). Redis CPU: \`INFO cpu\` (user+sys) delta over the run /
EVALSHA calls; usec_per_call: \`INFO commandstats\` after \`CONFIG RESETSTAT\`.

| Script | Clients | Pipeline | Calls/s | p50 us | p99 us | Redis CPU us/call | usec_per_call |
|---|---|---|---|---|---|---|---|
EOF
for s in ref sluice; do
  [ "$s" = ref ] && label=reference || label=Sluice
  for run in c50_P1 c50_P16 c1_P1; do
    n="rb_${s}_$run"
    c="${run%%_*}"
    p="${run##*_}"
    echo "| $label | ${c#c} | ${p#P} | $(k "$n.per_sec") | $(f "$n.p50_us") | $(f "$n.p99_us") | $(f "$n.cpu_us_per_call") | $(f "$n.usec_per_call") |"
  done
done
cat <<EOF

Sluice's script vs the reference, same tool, same load: $(ratio rb_sluice_c50_P1.per_sec rb_ref_c50_P1.per_sec)x
the calls/s at -P 1, $(ratio rb_sluice_c50_P16.per_sec rb_ref_c50_P16.per_sec)x at -P 16.

## (b) The library on the Redis backend

\`sluice_bench_redis --callers N --keys 10000\` ([bench/redis_load.cpp](../bench/redis_load.cpp)):
\`sluice::limiter\` over \`make_redis_backend\` (one connection; checks queued together go out as
one call of [lua/decide_batch.lua](../lua/decide_batch.lua), at most \`max_batch\` = 32
per call and 4 calls in flight; a lone check goes out at once as lua/decide.lua). async: N chains
of \`async_check\` on one thread, each issuing its next check when the previous completes (N
checks in flight); loop: the same chains with the backend's connection on their io_context
(\`redis_options::run_on\`: one thread does everything, no hand-off between threads per check);
threads: one thread calling the blocking \`check\`. ${F[lib_async_1.per_sec]:+1 s warm-up, then} the
measured window; latency is from the call to its completion handler.

| Mode | Callers | max_batch | Decisions/s | p50 us | p99 us | p99.9 us | Redis CPU us/decision | Decisions per EVALSHA | Degraded | vs redis-benchmark ref -P 16 |
|---|---|---|---|---|---|---|---|---|---|---|
EOF
for n in lib_async_1 lib_async_50 lib_async_500 lib_async_50_batch1 lib_loop_1 lib_loop_50 lib_loop_500 lib_threads_1; do
  mode="${n#lib_}"
  mode="${mode%%_*}"
  callers="${n#lib_*_}"
  callers="${callers%%_*}"
  echo "| $mode | $callers | $(f "$n.max_batch") | $(k "$n.per_sec") | $(f "$n.p50_us") | $(f "$n.p99_us") | $(f "$n.p999_us") | $(f "$n.cpu_us_per_decision") | $(f "$n.decisions_per_call") | $(f "$n.degraded") | $(ratio "$n.per_sec" rb_ref_c50_P16.per_sec)x |"
done
cat <<EOF

## (c) Redis memory per tracked key

$(f mem_ref.keys) keys \`bucket:0000000\`.. loaded by one pipelined EVALSHA each (\`redis-cli --pipe\`),
after \`FLUSHALL\`; bytes/key = \`INFO memory\` used_memory delta / DBSIZE (so it includes the
keyspace and expires dictionaries). The refill is slow (0.001/s) so no key expires meanwhile.

| Script | Keys | Bytes/key (used_memory) | MEMORY USAGE of one key |
|---|---|---|---|
| reference (hash: tokens, ts) | $(f mem_ref.keys) | $(f mem_ref.bytes_per_key) | $(f mem_ref.memory_usage) |
| Sluice (string "level_ut ts_ms") | $(f mem_sluice.keys) | $(f mem_sluice.bytes_per_key) | $(f mem_sluice.memory_usage) |
| floor: one key with a TTL and no value memory ([key_ttl_floor.lua](../bench/lua_variants/key_ttl_floor.lua)) | $(f mem_floor.keys) | $(f mem_floor.bytes_per_key) | $(f mem_floor.memory_usage) |

The floor row is the least any design that gives each client its own key with its own expiry
can cost on this Redis (7.0: no per-field hash expiry): the key's string, its keyspace and
expires entries and their hash-table slots, with the value a shared integer. When it is above
0.6x of the reference, no encoding of the bucket's state can meet that target without giving
up one key per client (which Redis Cluster routing and exact idle expiry rely on).

### Every algorithm ([ALGORITHMS.md](ALGORITHMS.md))

Bytes per key: one admitted request per key (buckets of 100 at 0.001/s, windows of 100 per
day), loaded as above. Redis CPU per decision: [lua/decide_batch.lua](../lua/decide_batch.lua)
with 16 decisions per call as the library sends them, under \`redis-benchmark -c 50 -P 16\`
(buckets 100 per 100 s, windows 100 per minute), INFO cpu delta / decisions.

| Algorithm | Bytes/key | vs reference | Redis CPU us/decision |
|---|---|---|---|
$(for a in token_bucket gcra sliding_window sliding_window_counter fixed_window; do
  echo "| $a | $(f mem_algo_$a.bytes_per_key) | $(ratio mem_algo_$a.bytes_per_key mem_ref.bytes_per_key)x | $(f algo_$a.cpu_us_per_decision) |"
done)

### Where a decision's Redis CPU goes

The same load (\`-c 50 -P 16\`, 10k keys) on script variants in [bench/lua_variants/](../bench/lua_variants/);
Redis CPU per decision = \`INFO cpu\` delta / (EVALSHA calls x keys per call).

| Script | Keys per call | Redis CPU us/decision | vs reference |
|---|---|---|---|
EOF
for v in reference:"reference (seed post)" noop:"return 1 (the EVALSHA floor)" get_set:"GET + SET PX, constant value" time_get_set:"TIME + GET + SET PX, constant value" sluice:"lua/decide.lua" struct:"token_bucket_struct.lua, state as struct.pack (not taken: another stored format)" batch16:"lua/decide_batch.lua, 16 keys per call" batch32:"lua/decide_batch.lua, 32 keys per call" batchv1_16:"token_bucket_batch_v1.lua, the batch script before (GET per key, nested replies, %.0f), 16 keys"; do
  n="var_${v%%:*}"
  echo "| ${v#*:} | $(f "$n.keys_per_call") | $(f "$n.cpu_us_per_decision") | $(ratio "$n.cpu_us_per_decision" var_reference.cpu_us_per_decision)x |"
done
cat <<EOF

## (d) Memory backend

\`sluice_bench_memory\` ([bench/memory_backend_bench.cpp](../bench/memory_backend_bench.cpp)),
Google Benchmark, random keys, every key created before timing, nearly all checks admitted.
Clocks: *steady* is the default \`sluice::steady_clock\` (a clock_gettime per decision, ~60 ns on
this VM's kvm-clock); *ticking* is a cheap clock, an atomic refreshed from steady_clock every
millisecond by a background thread (the math works in whole milliseconds; lag only makes the
limiter stricter). Decisions/s is wall-clock; per CPU-second discounts time other processes
took from the benchmark.

| Keys | Clock | Threads | Decisions/s | Decisions per CPU-second |
|---|---|---|---|---|
EOF
for keys in 10000 1000000; do
  for clock in steady ticking; do
    for t in $(printf '%s\n' "${!F[@]}" | sed -n "s/^mem_${keys}_${clock}_t\([0-9]*\)\.per_sec$/\1/p" | sort -n); do
      n="mem_${keys}_${clock}_t$t"
      echo "| $keys | $clock | $t | $(m "$n.per_sec") | $(m "$n.per_cpu_sec") |"
    done
  done
done
cat <<EOF

## (e) sluiced \`POST /v1/check\` beside nginx \`return 204\`

\`wrk -t 2 -c C -d Ns -s bench/wrk_check.lua\` (one thread for one connection): the same
pre-formatted POST /v1/check requests over 10k keys go to both; nginx answers \`return 204\`
(\`worker_processes $(nproc)\`), sluiced (default threads: one per core) decides with policy
capacity 100, refill 100/s. Degraded decisions (from sluiced's /metrics) are answers of the
failure mode (open) because Redis did not answer within sluiced's 50 ms backend timeout: those
requests were served, but not decided by Redis.

| Server | Connections | Requests/s | p50 us | p99 us | p99.9 us | Non-2xx | Socket errors | Degraded decisions | vs nginx |
|---|---|---|---|---|---|---|---|---|---|
EOF
for name in nginx sluiced_mem sluiced_redis; do
  case "$name" in
    nginx) label="nginx return 204" ;;
    sluiced_mem) label="sluiced (memory)" ;;
    *) label="sluiced (redis)" ;;
  esac
  for c in 1 50 500; do
    n="${name}_c$c"
    [ -n "${F[$n.per_sec]:-}" ] || continue
    echo "| $label | $c | $(k "$n.per_sec") | $(f "$n.p50_us") | $(f "$n.p99_us") | $(f "$n.p999_us") | $(f "$n.non2xx") | $(f "$n.errors") | $(f "$n.degraded") | $(ratio "$n.per_sec" "nginx_c$c.per_sec")x |"
  done
done
if [ -n "${F[sluiced_redis_c50.cpu_us_per_decision]:-}" ]; then
  echo
  echo "Redis CPU per decision behind sluiced (redis), INFO cpu delta / requests: 1 connection $(f sluiced_redis_c1.cpu_us_per_decision) us, 50: $(f sluiced_redis_c50.cpu_us_per_decision) us, 500: $(f sluiced_redis_c500.cpu_us_per_decision) us (EVALSHA calls: $(f sluiced_redis_c1.calls), $(f sluiced_redis_c50.calls), $(f sluiced_redis_c500.calls))."
fi
cat <<EOF

## (f) Envoy's rate limit service: ShouldRateLimit beside \`POST /v1/check\`

\`sluice_bench_rls\` ([bench/rls_load.cpp](../bench/rls_load.cpp); two HTTP/2 connections, as
an Envoy with two workers opens) keeps S calls in flight, each stream sending its next call
when the previous one is answered; \`/v1/check\` is wrk as in (e), on the same sluiced,
measured just before at the same concurrency. Its client speaks gRPC's wire format over
nghttp2 on one thread ([bench/rls_h2_transport.cpp](../bench/rls_h2_transport.cpp)): about as
light as wrk, and the HTTP/2 library h2load and (before oghttp2) Envoy itself use. The
\`grpc\` rows at 50 streams are the same call from gRPC's own C++ client, which costs
about as much CPU per call as sluiced does and so takes half the machine from it. Domain \`bench\`: one
descriptor \`{client: k:<i>}\` over 10k keys with /v1/check's limit (token bucket, 100 at
100/s), or three (\`client\`, a \`tenant\` of 100 values and one \`route\`, whose limits are
never reached), decided all-or-nothing in one step. The load tools run on the same machine
as sluiced and take CPU from it.

The sluiced CPU columns are the daemon's own CPU time (user + system, /proc) over a run
divided by the calls it answered: what a call costs the server, whatever the client costs.

| Backend | Concurrency | /v1/check req/s | p99 us | sluiced CPU us/req | RLS 1 descriptor calls/s | p50 us | p99 us | sluiced CPU us/call | vs /v1/check | RLS 3 descriptors calls/s | p50 us | p99 us | sluiced CPU us/call | errors (1 / 3) |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
EOF
for b in memory redis; do
  for c in 1 50 500; do
    [ -n "${F[rls_${b}_d1_c$c.per_sec]:-}" ] || continue
    echo "| $b | $c | $(k "rlsref_${b}_c$c.per_sec") | $(f "rlsref_${b}_c$c.p99_us") | $(f "rlsref_${b}_c$c.server_us") | $(k "rls_${b}_d1_c$c.per_sec") | $(f "rls_${b}_d1_c$c.p50_us") | $(f "rls_${b}_d1_c$c.p99_us") | $(f "rls_${b}_d1_c$c.server_us") | $(ratio "rls_${b}_d1_c$c.per_sec" "rlsref_${b}_c$c.per_sec")x | $(k "rls_${b}_d3_c$c.per_sec") | $(f "rls_${b}_d3_c$c.p50_us") | $(f "rls_${b}_d3_c$c.p99_us") | $(f "rls_${b}_d3_c$c.server_us") | $(f "rls_${b}_d1_c$c.errors") / $(f "rls_${b}_d3_c$c.errors") |"
  done
  g="rls_${b}_grpc_d1_c50"
  if [ -n "${F[$g.per_sec]:-}" ]; then
    echo "| $b, gRPC's C++ client | 50 | $(k "rlsref_${b}_c50.per_sec") | $(f "rlsref_${b}_c50.p99_us") | $(f "rlsref_${b}_c50.server_us") | $(k "$g.per_sec") | $(f "$g.p50_us") | $(f "$g.p99_us") | $(f "$g.server_us") | $(ratio "$g.per_sec" "rlsref_${b}_c50.per_sec")x | | | | | $(f "$g.errors") / |"
  fi
done
if [ -n "${F[rls_memory_h2load_c50.per_sec]:-}${F[rls_redis_h2load_c50.per_sec]:-}" ]; then
  cat <<EOF

The same one-descriptor call under \`h2load\` (nghttp2's HTTP/2 load tool, written in C: a
client about as light as wrk, so the calls/s compare the servers more than the clients).
h2load sends one body, so every call asks about the same key (\`{tenant: t:01}\`, never over
its limit), where /v1/check's calls spread over 10k keys; it reports no percentiles.

| Backend | Streams | /v1/check req/s | RLS calls/s (h2load) | vs /v1/check | mean us | sluiced CPU us/call | failed |
|---|---|---|---|---|---|---|---|
EOF
  for b in memory redis; do
    for c in 1 50 500; do
      [ -n "${F[rls_${b}_h2load_c$c.per_sec]:-}" ] || continue
      echo "| $b | $c | $(k "rlsref_${b}_c$c.per_sec") | $(k "rls_${b}_h2load_c$c.per_sec") | $(ratio "rls_${b}_h2load_c$c.per_sec" "rlsref_${b}_c$c.per_sec")x | $(f "rls_${b}_h2load_c$c.mean_us") | $(f "rls_${b}_h2load_c$c.server_us") | $(f "rls_${b}_h2load_c$c.failed") |"
    done
  done
fi
if [ -n "${F[rls_memory_d1_c50_open10000.rate]:-}${F[rls_redis_d1_c50_open10000.rate]:-}${F[rls_memory_d1_c50_open5000.rate]:-}${F[rls_redis_d1_c50_open5000.rate]:-}" ]; then
  cat <<EOF

Open loop: the one-descriptor call at 50 streams under \`sluice_bench_rls --rate R\` at fixed
rates R of 5000 and 10000 calls/s, well below the closed loop's maximum (the table above):
the latency at an everyday load rather than at saturation. Each stream sends on a fixed schedule whatever the answers do, as Envoy's
calls arrive at the rate of user traffic; latency counts from the time a call was due, not
the time it went out, so a stall counts against every call it held back (no coordinated
omission). A call that comes due while its stream's previous call is unanswered is *late*:
it goes out when that answer arrives. Achieved is the answers that arrived within the
window, per second (a backlog left from the warm-up counts there too); unsent, calls still
owed a window's length after the window ended (given up); send lag, how long after their
time calls went out (late ones included; with few of them, the tool's own part of the
latency, its timer woken late by a busy machine among it). The closed loop keeps the server
saturated, so its p99 includes the time calls wait behind one another; these rows ask for
the latency below saturation. Calls that arrive spread out are batched less than a
saturated closed loop's (fewer calls per read, write and wake-up), so each costs client and
sluiced more CPU: on two cores shared by both, the open loop carries only about half the
closed loop's rate (about 13k/s of 26k/s on memory when this was written), and many late
calls, or an achieved rate under the target, mean the machine could not carry that load.

| Backend | Streams | Load | Target calls/s | Achieved calls/s | p50 us | p99 us | p99.9 us | Late | Unsent | Send lag p99 us | sluiced CPU us/call | errors |
|---|---|---|---|---|---|---|---|---|---|---|---|---|
EOF
  for b in memory redis; do
    for p in 5000 10000; do
      n="rls_${b}_d1_c50_open$p"
      [ -n "${F[$n.rate]:-}" ] || continue
      echo "| $b | 50 | fixed (closed loop: $(k "rls_${b}_d1_c50.per_sec")/s) | $(k "$n.rate") | $(k "$n.per_sec") | $(f "$n.p50_us") | $(f "$n.p99_us") | $(f "$n.p999_us") | $(f "$n.late") | $(f "$n.unsent") | $(f "$n.send_lag_p99_us") | $(f "$n.server_us") | $(f "$n.errors") |"
    done
  done
fi
cat <<EOF

## Plot

[docs/bench/concurrency.svg](bench/concurrency.svg), drawn by \`sluice_bench_plot\`
([bench/plot_svg.cpp](../bench/plot_svg.cpp)) from [docs/bench/results.tsv](bench/results.tsv):
library \`async_check\` decisions/s (own I/O thread and run_on) and sluiced/nginx requests/s (left), p99 (right), against
callers or connections. All figures of the run, by name: [docs/bench/figures.tsv](bench/figures.tsv).
EOF
if [ -f "$(dirname "$0")/analysis.md" ]; then
  echo
  cat "$(dirname "$0")/analysis.md"
fi
