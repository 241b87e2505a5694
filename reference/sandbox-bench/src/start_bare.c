/* A process that ends at once without any C library start-up: the floor a process start costs
   the kernel alone (exec, address space, exit). Built with -nostdlib -static by sandbox-bench. */
void _start(void) {
#if defined(__x86_64__)
    __asm__ volatile("mov $231, %eax\n\txor %edi, %edi\n\tsyscall");
#elif defined(__aarch64__)
    __asm__ volatile("mov x8, #94\n\tmov x0, #0\n\tsvc #0");
#else
#error "sandbox-bench's bare start: x86_64 or aarch64 only"
#endif
    for (;;) {
    }
}
