/* ARM semihosting (ARM DUI 0471, "Semihosting operations"): r0 = operation,
 * r1 = pointer to the argument block; QEMU answers in r0. */
#include <string.h>

#include "semihost.h"

#define SYS_OPEN 0x01
#define SYS_CLOSE 0x02
#define SYS_WRITE0 0x04
#define SYS_WRITE 0x05
#define SYS_READ 0x06
#define SYS_EXIT_EXTENDED 0x20
#define ADP_STOPPED_APPLICATION_EXIT 0x20026

static int call(int op, void *arg)
{
    register int r0 __asm__("r0") = op;
    register void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

int sh_open(const char *path, int mode)
{
    long a[3];
    a[0] = (long)path;
    a[1] = mode;
    a[2] = (long)strlen(path);
    return call(SYS_OPEN, a);
}

long sh_read(int fd, void *buf, size_t n)
{
    long a[3];
    a[0] = fd;
    a[1] = (long)buf;
    a[2] = (long)n;
    return (long)n - call(SYS_READ, a); /* the call returns the bytes NOT read */
}

int sh_write(int fd, const void *buf, size_t n)
{
    long a[3];
    a[0] = fd;
    a[1] = (long)buf;
    a[2] = (long)n;
    return call(SYS_WRITE, a);
}

void sh_close(int fd)
{
    long a = fd;
    call(SYS_CLOSE, &a);
}

void sh_puts(const char *s)
{
    call(SYS_WRITE0, (void *)s);
}

void sh_exit(int status)
{
    long a[2];
    a[0] = ADP_STOPPED_APPLICATION_EXIT;
    a[1] = status;
    call(SYS_EXIT_EXTENDED, a);
    for (;;) {
    }
}
