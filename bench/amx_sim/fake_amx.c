/* LD_PRELOAD shim: pretend the kernel granted AMX tile-data permission.
 * Overrides libc's syscall(): arch_prctl(ARCH_REQ_XCOMP_PERM, ...) -> 0,
 * everything else is forwarded to the real libc syscall(). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>

#define ARCH_REQ_XCOMP_PERM 0x1023

typedef long (*syscall_fn)(long, ...);

long syscall(long number, ...) {
    va_list ap;
    va_start(ap, number);
    long a1 = va_arg(ap, long), a2 = va_arg(ap, long), a3 = va_arg(ap, long);
    long a4 = va_arg(ap, long), a5 = va_arg(ap, long), a6 = va_arg(ap, long);
    va_end(ap);

    if (number == SYS_arch_prctl && a1 == ARCH_REQ_XCOMP_PERM) {
        if (getenv("FAKEAMX_VERBOSE"))
            fprintf(stderr, "[fakeamx] arch_prctl(ARCH_REQ_XCOMP_PERM, %ld) -> 0 (faked)\n", a2);
        return 0;
    }
    static syscall_fn real;
    if (!real) real = (syscall_fn)dlsym(RTLD_NEXT, "syscall");
    return real(number, a1, a2, a3, a4, a5, a6);
}
