// ThreadSanitizer builds only (the tsan preset): reports that come from inside Debian's gRPC
// libraries, which are not instrumented. TSan sees their system calls (epoll, the sockets)
// through its interceptors but not the locks and atomics that order them (gRPC's own
// synchronization, compiled without TSan), so it reports races between gRPC's threads that
// are none: e.g. an epoll descriptor made by one thread and waited on by another. Sluice's
// own code stays checked: a report is kept unless a frame of its stack is in these libraries.
#if defined(__SANITIZE_THREAD__)
#define SLUICE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SLUICE_TSAN 1
#endif
#endif

#ifdef SLUICE_TSAN
extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:libgrpc.so\n"
         "called_from_lib:libgrpc++.so\n"
         "called_from_lib:libgpr.so\n"
         "race:libgrpc.so\n"
         "race:libgrpc++.so\n"
         "race:libgpr.so\n"
         "race:libabsl_\n";
}
#endif
