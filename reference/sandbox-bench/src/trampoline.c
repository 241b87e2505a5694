/* The floor of the Landlock path: a minimal static Landlock trampoline, built by the benchmark
   with the system C compiler. It governs the same write rights as landlock-run (every write right
   of ABI 3), grants each --rw path (a directory all of them, a file write and truncate), scopes
   signals and abstract unix sockets when the kernel can (ABI 6), sets no_new_privs, restricts
   itself and execs. No monitor, no capability drop, no seccomp guard, no status channel. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* linux/landlock.h, spelled out: the build host's headers may predate the ABI used here. */
struct ruleset_attr { unsigned long long fs, net, scoped; };
struct path_beneath { unsigned long long allowed; int parent_fd; } __attribute__((packed));
#define RULE_PATH_BENEATH 1
#define NR_CREATE_RULESET 444
#define NR_ADD_RULE 445
#define NR_RESTRICT_SELF 446
/* WRITE_FILE, REMOVE_DIR, REMOVE_FILE, MAKE_{CHAR,DIR,REG,SOCK,FIFO,BLOCK,SYM}, REFER, TRUNCATE. */
#define WRITE_RIGHTS ((1ULL << 1) | (1ULL << 4) | (1ULL << 5) | (0x7fULL << 6) | (1ULL << 13) | (1ULL << 14))
#define FILE_RIGHTS ((1ULL << 1) | (1ULL << 14))
#define SCOPES 3ULL /* ABSTRACT_UNIX_SOCKET | SIGNAL */

int main(int argc, char **argv) {
  struct ruleset_attr attr = {.fs = WRITE_RIGHTS, .scoped = SCOPES};
  int rs = syscall(NR_CREATE_RULESET, &attr, sizeof attr, 0);
  if (rs < 0) rs = syscall(NR_CREATE_RULESET, &attr, sizeof attr.fs, 0); /* before ABI 6 */
  if (rs < 0) { perror("trampoline: create_ruleset"); return 125; }
  int i = 1;
  for (; i + 1 < argc && strcmp(argv[i], "--rw") == 0; i += 2) {
    struct path_beneath pb;
    struct stat st;
    pb.parent_fd = open(argv[i + 1], O_PATH | O_CLOEXEC);
    if (pb.parent_fd < 0 || fstat(pb.parent_fd, &st)) { perror(argv[i + 1]); return 125; }
    pb.allowed = S_ISDIR(st.st_mode) ? WRITE_RIGHTS : FILE_RIGHTS;
    if (syscall(NR_ADD_RULE, rs, RULE_PATH_BENEATH, &pb, 0)) { perror(argv[i + 1]); return 125; }
    close(pb.parent_fd);
  }
  if (i < argc && strcmp(argv[i], "--") == 0) i++;
  if (i >= argc) { fputs("trampoline: nothing to run\n", stderr); return 125; }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) { perror("trampoline: no_new_privs"); return 125; }
  if (syscall(NR_RESTRICT_SELF, rs, 0)) { perror("trampoline: restrict_self"); return 125; }
  close(rs);
  execvp(argv[i], argv + i);
  perror(argv[i]);
  return 125;
}
