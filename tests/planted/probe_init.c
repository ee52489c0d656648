// Manual probe for the planted kernel bug (tests/planted/0001-*.patch), run as
// the /init of a one-file initramfs:
//   gcc -static -O1 -o init probe_init.c && mkdir -p r/dev && cp init r/ &&
//   mknod r/dev/console c 5 1 && (cd r && find . | cpio -o -H newc | gzip > ../p.cpio.gz)
//   qemu-system-x86_64 -M pc -cpu max -smp 2 -m 256 -nographic -no-reboot \
//     -kernel vmlinux -initrd p.cpio.gz -append "console=ttyS0 [leapfrog_planted=0]"
// An observer (uid 65534, CPU 1) stats /w/d/e/f, root chmods /w/d to 0700 on
// CPU 0, then the observer stats 1000 more times. With the bug on, they all
// succeed (stale grants); off, none do; a single task on CPU 0 is always denied.
// It also prints the online CPU count: an allnoconfig kernel without ACPI saw
// only one, which hides every cross-CPU race. The CI test will replace this.
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
static void pin(int c) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(c, &s); if (sched_setaffinity(0, sizeof s, &s)) perror("affinity"); }
int main(void) {
  mkdir("/w", 0755);
  if (mount("tmpfs", "/w", "tmpfs", 0, "mode=0755")) perror("mount");
  mkdir("/w/d", 0755); mkdir("/w/d/e", 0755);
  FILE* f = fopen("/w/d/e/f", "w"); if (f) fclose(f);
  volatile int* sh = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  sh[0] = 0; sh[1] = 0; sh[2] = 0;
  printf("probe: cpus online %ld\n", sysconf(_SC_NPROCESSORS_ONLN));
  pid_t p = fork();
  if (p == 0) {
    pin(1);
    setgid(65534); setuid(65534);
    struct stat st;
    int r = stat("/w/d/e/f", &st);  // caches the grant for /w/d on CPU1
    printf("probe: observer first stat %d\n", r);
    sh[0] = 1;
    while (sh[1] == 0) {}
    int stale = 0;
    for (int i = 0; i < 1000; i++) if (stat("/w/d/e/f", &st) == 0) stale++;
    printf("probe: after chmod 0700 on CPU0: %d of 1000 stats succeeded (planted: >0, clean: 0)\n", stale);
    fflush(stdout);
    _exit(0);
  }
  pin(0);
  while (sh[0] == 0) {}
  chmod("/w/d", 0700);
  struct stat st;
  pid_t q = fork();
  if (q == 0) { setgid(65534); setuid(65534); printf("probe: single-thread check on CPU0: stat %s\n", stat("/w/d/e/f", &st) == 0 ? "SUCCEEDED (bug)" : "denied (right)"); fflush(stdout); _exit(0); }
  waitpid(q, 0, 0);
  sh[1] = 1;
  waitpid(p, 0, 0);
  printf("probe: done\n"); fflush(stdout);
  reboot(RB_POWER_OFF);
  return 0;
}
