/*
 * Another local user racing to take a job's shared memory (check_shm_attack.sh runs it as that
 * user): it watches /dev/shm, and for every name of libspmd's rings that appears it
 *   - tries to open that segment for writing (the job's, mode 0600: it must be refused);
 *   - creates, as fast as it can, the names it can guess from it: the same name with each
 *     process index after its last '-' (the names of a job before this check), and the name's
 *     own prefix with other tokens; each made writable for all, the segment's size, with a
 *     head that a reader would take for the job's (magic, the job's number where the name
 *     shows it, the process index, the machine's process count);
 * until SIGTERM. It then prints "seen N opened N created N" and exits 0.
 *
 * usage: shm_attacker PROCESSES_ON_THE_MACHINE
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define SEGMENT_MAGIC 0x73706d6472696e67ull /* "spmdring": libspmd's segment head */

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

static int seen, opened, created;

/* Creates /dev/shm/<name> for everyone, `bytes` long, with a head claiming owner `owner`. */
static void plant(const char *name, off_t bytes, uint64_t job, int32_t owner, int32_t processes)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    int fd = open(path, O_CREAT | O_EXCL | O_RDWR, 0666);
    if (fd < 0)
        return;
    fchmod(fd, 0666);
    struct {
        uint64_t magic, job;
        int32_t owner, processes;
    } head = {SEGMENT_MAGIC, job, owner, processes};
    if (ftruncate(fd, bytes) == 0 && pwrite(fd, &head, sizeof head, 0) == (ssize_t)sizeof head)
        created++;
    close(fd);
}

static void attack(const char *name, int processes)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    struct stat st;
    if (stat(path, &st) != 0 || st.st_uid == getuid())
        return; /* gone already, or one of this program's own */
    seen++;
    int fd = open(path, O_RDWR);
    if (fd >= 0) {
        opened++;
        close(fd);
    }
    off_t bytes = st.st_size ? st.st_size : 4096; /* the segment may not be sized yet */
    const char *last = strrchr(name, '-');
    if (!last)
        return;
    int prefix = (int)(last - name);
    char *end = NULL;
    uint64_t job = strtoull(name + strlen("spmd-rings-"), &end, 16);
    for (int p = 0; p < processes; p++) { /* <prefix>-<process>: the old names */
        char guess[NAME_MAX + 1];
        snprintf(guess, sizeof guess, "%.*s-%d", prefix, name, p);
        plant(guess, bytes, job, p, processes);
    }
    for (int k = 0; k < processes; k++) { /* <prefix>-<another token> */
        char guess[NAME_MAX + 1];
        snprintf(guess, sizeof guess, "%.*s-%032x", prefix, name, k);
        plant(guess, bytes, job, k, processes);
    }
}

int main(int argc, char **argv)
{
    int processes = argc > 1 ? atoi(argv[1]) : 4;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    int in = inotify_init1(0);
    if (in < 0 || inotify_add_watch(in, "/dev/shm", IN_CREATE) < 0) {
        fprintf(stderr, "shm_attacker: inotify on /dev/shm: %s\n", strerror(errno));
        return 2;
    }
    printf("watching %ld\n", (long)getpid());
    fflush(stdout);
    char events[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
    while (!stop) {
        ssize_t got = read(in, events, sizeof events);
        if (got <= 0)
            continue; /* EINTR at SIGTERM */
        for (char *at = events; at < events + got;) {
            struct inotify_event *e = (struct inotify_event *)at;
            if (e->len && strncmp(e->name, "spmd-rings-", 11) == 0)
                attack(e->name, processes);
            at += sizeof *e + e->len;
        }
    }
    printf("seen %d opened %d created %d\n", seen, opened, created);
    return 0;
}
