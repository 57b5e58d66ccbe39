/* The clock below Python (pipeline/execution/freeze.py, "clock below Python"): preloaded into every sandbox
 * worker, it answers libc's wall-clock reads (clock_gettime of the realtime clocks, gettimeofday, time,
 * timespec_get) with the frozen clock a child sets in ENVSIM_FROZEN_TIME (seconds since the epoch, read at every
 * call); without that variable (a worker itself) they are the real ones. Monotonic and CPU clocks, sleeps and
 * timeouts are untouched. It also answers libc's processor counts (get_nprocs, get_nprocs_conf, sysconf of
 * _SC_NPROCESSORS_*, sched_getaffinity) with ENVSIM_CPUS when a child sets it (freeze.HOST_CPUS), libc's
 * memory (sysinfo, get_phys_pages, get_avphys_pages, sysconf of _SC_PHYS_PAGES/_SC_AVPHYS_PAGES) with the constant
 * freeze.HOST_MEMORY_MB (the sysinfo syscall itself is answered ENOSYS by the seccomp filter, and glibc's sysconf
 * would read an uninitialised struct), and libc's uname with the constant host of freeze.py (node "envsim", release "envsim", version "#1 envsim"). Built by
 * freeze.clock_library() with the machine's C compiler. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <unistd.h>
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

static int cpus(void) {
    const char *text = getenv("ENVSIM_CPUS");
    int n = text == NULL ? 0 : atoi(text);
    return n > 0 && n <= CPU_SETSIZE ? n : 0;
}

int get_nprocs(void) {
    static int (*real)(void);
    if (cpus()) return cpus();
    if (real == NULL) real = dlsym(RTLD_NEXT, "get_nprocs");
    return real();
}

int get_nprocs_conf(void) {
    static int (*real)(void);
    if (cpus()) return cpus();
    if (real == NULL) real = dlsym(RTLD_NEXT, "get_nprocs_conf");
    return real();
}

#define ENVSIM_RAM (4096UL << 20) /* freeze.HOST_MEMORY_MB: the memory every sandbox reports, all of it free */

int sysinfo(struct sysinfo *info) {
    memset(info, 0, sizeof *info);
    info->totalram = ENVSIM_RAM;
    info->freeram = ENVSIM_RAM;
    info->procs = 1;
    info->mem_unit = 1;
    return 0;
}

static long real_sysconf(int name) {
    static long (*real)(int);
    if (real == NULL) real = dlsym(RTLD_NEXT, "sysconf");
    return real(name);
}

long get_phys_pages(void) { return (long)(ENVSIM_RAM / (unsigned long)real_sysconf(_SC_PAGESIZE)); }

long get_avphys_pages(void) { return get_phys_pages(); }

long sysconf(int name) {
    if ((name == _SC_NPROCESSORS_ONLN || name == _SC_NPROCESSORS_CONF) && cpus()) return cpus();
    if (name == _SC_PHYS_PAGES || name == _SC_AVPHYS_PAGES) return get_phys_pages();
    return real_sysconf(name);
}

int sched_getaffinity(pid_t pid, size_t size, cpu_set_t *mask) {
    static int (*real)(pid_t, size_t, cpu_set_t *);
    if (real == NULL) real = dlsym(RTLD_NEXT, "sched_getaffinity");
    int status = real(pid, size, mask);
    int n = cpus();
    if (status == 0 && n) {
        CPU_ZERO_S(size, mask);
        for (int i = 0; i < n && (size_t)i < size * 8; i++) CPU_SET_S(i, size, mask);
    }
    return status;
}

int uname(struct utsname *name) {
    static int (*real)(struct utsname *);
    if (real == NULL) real = dlsym(RTLD_NEXT, "uname");
    int status = real(name);
    if (status == 0 && cpus()) {
        strcpy(name->nodename, "envsim");
        strcpy(name->release, "envsim");
        strcpy(name->version, "#1 envsim");
        strcpy(name->domainname, "(none)");
    }
    return status;
}
