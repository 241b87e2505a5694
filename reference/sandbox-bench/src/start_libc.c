/* A process that ends at once after the C library's own start-up (static glibc: its CPU feature
   and cache probe, TLS, stdio): beside start_bare.c, what that start-up costs on this host. */
int main(void) { return 0; }
