/* Minimal Cortex-M startup for the QEMU harness: vector table, .data copy,
 * .bss zeroing, FPU enable on hard-float builds, main(), semihosting exit.
 * Any fault ends the run with status 99. */
#include <stdint.h>
#include <string.h>

#include "semihost.h"

extern uint32_t _estack, _sidata, _sdata, _edata, _sbss, _ebss;
int main(void);

void Reset_Handler(void)
{
    memcpy(&_sdata, &_sidata, (size_t)((char *)&_edata - (char *)&_sdata));
    memset(&_sbss, 0, (size_t)((char *)&_ebss - (char *)&_sbss));
#if defined(__ARM_FP)
    /* CPACR: full access to CP10 and CP11, or the first FP instruction faults */
    *(volatile uint32_t *)0xE000ED88 |= 0xFu << 20;
    __asm__ volatile("dsb\n\tisb");
#endif
    sh_exit(main());
}

void Default_Handler(void)
{
    sh_puts("harness: fault\n");
    sh_exit(99);
}

__attribute__((section(".vectors"), used)) static void (*const vectors[16])(void) = {
    (void (*)(void))(&_estack), Reset_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, 0, 0, 0, 0, Default_Handler, Default_Handler, 0,
    Default_Handler, Default_Handler};
