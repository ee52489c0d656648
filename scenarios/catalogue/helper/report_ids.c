/*
 * report_ids: writes "EUID EGID\n" to standard output and exits 0.
 *
 * exec-setid's observers execve it (directly and as a script's interpreter)
 * to learn the credentials the kernel gave the new program. It runs with no
 * shared libraries and no libc (VM initramfs images have none), so it is
 * built -static -nostdlib with raw system calls. The scenarios library
 * embeds its bytes (embed_bytes.cmake) and the agent writes it into the test
 * tree.
 */

#if defined(__x86_64__)
#define NR_write 1
#define NR_exit 60
#define NR_geteuid 107
#define NR_getegid 108
static long sc3(long n, long a, long b, long c) {
  long r;
  __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return r;
}
#elif defined(__aarch64__)
#define NR_write 64
#define NR_exit 93
#define NR_geteuid 175
#define NR_getegid 177
static long sc3(long n, long a, long b, long c) {
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
  return x0;
}
#else
#error "report_ids: add this architecture's system call numbers"
#endif

static char* put(char* p, unsigned long v) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  while (n) *p++ = tmp[--n];
  return p;
}

#if defined(__x86_64__)
__attribute__((force_align_arg_pointer))
#endif
void _start(void) {
  char buf[64];
  char* p = put(buf, (unsigned long)sc3(NR_geteuid, 0, 0, 0));
  *p++ = ' ';
  p = put(p, (unsigned long)sc3(NR_getegid, 0, 0, 0));
  *p++ = '\n';
  sc3(NR_write, 1, (long)buf, p - buf);
  sc3(NR_exit, 0, 0, 0);
  for (;;) {
  }
}
