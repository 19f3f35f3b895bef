/* ARM semihosting calls (bkpt 0xAB) for the QEMU harness: files on the host,
 * console text and the exit status. No C library stdio involved. */
#ifndef ES_SEMIHOST_H
#define ES_SEMIHOST_H
#include <stddef.h>

int sh_open(const char *path, int mode);           /* mode 1 = "rb", 5 = "wb"; -1 on error */
long sh_read(int fd, void *buf, size_t n);         /* bytes read */
int sh_write(int fd, const void *buf, size_t n);   /* 0 = all written */
void sh_close(int fd);
void sh_puts(const char *s);                       /* to QEMU's stderr/console */
void sh_exit(int status) __attribute__((noreturn));
#endif
