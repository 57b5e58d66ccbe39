/* The clock below Python (pipeline/execution/freeze.py, "clock below Python"): preloaded into every sandbox
 * worker, it answers libc's wall-clock reads (clock_gettime of the realtime clocks, gettimeofday, time,
 * timespec_get) with the frozen clock a child sets in ENVSIM_FROZEN_TIME (seconds since the epoch, read at every
 * call); without that variable (a worker itself) they are the real ones. Monotonic and CPU clocks, sleeps and
 * timeouts are untouched. Built by freeze.clock_library() with the machine's C compiler. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static int (*real_clock_gettime)(clockid_t, struct timespec *);

static int frozen(struct timespec *ts) {
    const char *text = getenv("ENVSIM_FROZEN_TIME");
    if (text == NULL || *text == '\0') return 0;
    char *end;
    long double now = strtold(text, &end);
    if (end == text || now < 0) return 0;
    ts->tv_sec = (time_t)now;
    ts->tv_nsec = (long)((now - (long double)ts->tv_sec) * 1e9L);
    return 1;
}

static int is_wall(clockid_t id) {
    return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE || id == CLOCK_TAI;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    if (is_wall(id) && frozen(ts)) return 0;
    if (real_clock_gettime == NULL) real_clock_gettime = dlsym(RTLD_NEXT, "clock_gettime");
    return real_clock_gettime(id, ts);
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
    struct timeval *out = tv; /* may be NULL, whatever the prototype says */
    if (out != NULL) {
        out->tv_sec = ts.tv_sec;
        out->tv_usec = ts.tv_nsec / 1000;
    }
    if (tz != NULL) {
        struct timezone *zone = tz;
        zone->tz_minuteswest = 0;
        zone->tz_dsttime = 0;
    }
    return 0;
}

time_t time(time_t *out) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
    if (out != NULL) *out = ts.tv_sec;
    return ts.tv_sec;
}

int timespec_get(struct timespec *ts, int base) {
    if (base != TIME_UTC || clock_gettime(CLOCK_REALTIME, ts) != 0) return 0;
    return base;
}
