/* The sandbox's sysinfo (docs/environments.md "Sandbox"): preloaded into every worker, so libc's answers about
 * the machine's memory are constants, not the host's. The syscall itself is answered ENOSYS by the seccomp filter
 * (pipeline/execution/seccomp.py ANSWERED); glibc's sysconf(_SC_PHYS_PAGES) calls it without checking the result,
 * so without this library it would read an uninitialised struct. Built by isolation.sysinfo_preload(). */
#include <string.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#define ENVSIM_RAM (4UL << 30) /* the memory every sandbox reports: 4 GiB, half of it free */

extern long __sysconf(int name);

int sysinfo(struct sysinfo *info) {
    memset(info, 0, sizeof *info);
    info->totalram = ENVSIM_RAM;
    info->freeram = ENVSIM_RAM / 2;
    info->procs = 1;
    info->mem_unit = 1;
    return 0;
}

long get_phys_pages(void) { return (long)(ENVSIM_RAM / (unsigned long)__sysconf(_SC_PAGESIZE)); }

long get_avphys_pages(void) { return get_phys_pages() / 2; }

long sysconf(int name) {
    if (name == _SC_PHYS_PAGES) return get_phys_pages();
    if (name == _SC_AVPHYS_PAGES) return get_avphys_pages();
    return __sysconf(name);
}
