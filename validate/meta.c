/* The environment every report names: the machine and the commit. */
#include "internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "mla_version.h" /* MLA_GIT_COMMIT, stamped at build time */
#ifndef MLA_SOURCE_DIR
#define MLA_SOURCE_DIR "."
#endif

static void run_cmd(const char *cmd, char *out, size_t n)
{
    out[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (!p)
        return;
    if (fgets(out, (int)n, p)) {
        size_t l = strlen(out);
        while (l && (out[l - 1] == '\n' || out[l - 1] == '\r'))
            out[--l] = '\0';
    }
    pclose(p);
}

void val_describe_machine(char *out, size_t n)
{
    struct utsname u;
    char cpu[256] = "";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "model name", 10) == 0) {
                char *c = strchr(line, ':');
                if (c) {
                    snprintf(cpu, sizeof cpu, "%s", c + 2);
                    cpu[strcspn(cpu, "\n")] = '\0';
                }
                break;
            }
        fclose(f);
    }
    char gpu[256] = "";
    run_cmd("nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1", gpu,
            sizeof gpu);
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (uname(&u) == 0)
        snprintf(out, n, "%s %s %s, %s, %ld cores%s%s", u.nodename, u.sysname, u.machine,
                 cpu[0] ? cpu : "unknown CPU", ncpu, gpu[0] ? ", GPU " : "", gpu);
    else
        snprintf(out, n, "unknown machine");
}

/* The commit this binary was built from (stamped at build time); where the
 * build could not tell, the source tree's state now. */
void val_describe_commit(char *out, size_t n)
{
    snprintf(out, n, "%s", MLA_GIT_COMMIT);
    if (strcmp(out, "unknown") == 0) {
        run_cmd("git -C '" MLA_SOURCE_DIR "' describe --always --dirty --abbrev=12 2>/dev/null",
                out, n);
        if (!out[0])
            snprintf(out, n, "unknown");
    }
}
