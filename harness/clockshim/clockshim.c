/*
 * leasequake's clock shim: preloaded into the Redis image so that a fault can move one instance's
 * wall clock (Redis expires keys on it) without touching the host's. The offset, in ms, is the
 * decimal number at the start of $LEASEQUAKE_CLOCK_FILE (default /data/clock-offset-ms), read
 * through a shared mapping on every call, so a write into the file moves the clock at once.
 * CLOCK_REALTIME (and its coarse variant), gettimeofday() and time() are shifted; monotonic clocks
 * are not. No allocation and no dlsym: the real clock is read by system call, so nothing here can
 * recurse into an allocator (libfaketime does, under Debian's jemalloc Redis).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MAP_LEN 64

static const volatile char *offset_text;

__attribute__((constructor)) static void leasequake_clockshim_init(void) {
    const char *path = getenv("LEASEQUAKE_CLOCK_FILE");
    if (path == NULL) {
        path = "/data/clock-offset-ms";
    }
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        return;
    }
    off_t size = lseek(fd, 0, SEEK_END);
    if (size < MAP_LEN && ftruncate(fd, MAP_LEN) != 0) {
        close(fd);
        return;
    }
    void *p = mmap(NULL, MAP_LEN, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p != MAP_FAILED) {
        offset_text = p;
    }
}

/* The offset in ms: an optional sign and digits at the start of the file; anything else is 0. */
static long long offset_ms(void) {
    if (offset_text == NULL) {
        return 0;
    }
    long long v = 0;
    int i = 0, neg = 0;
    if (offset_text[0] == '-' || offset_text[0] == '+') {
        neg = offset_text[0] == '-';
        i = 1;
    }
    for (; i < MAP_LEN && offset_text[i] >= '0' && offset_text[i] <= '9'; i++) {
        v = v * 10 + (offset_text[i] - '0');
    }
    return neg ? -v : v;
}

static void shift(struct timespec *ts) {
    long long off = offset_ms();
    if (off == 0) {
        return;
    }
    long long ns = (long long)ts->tv_nsec + (off % 1000) * 1000000LL;
    long long s = (long long)ts->tv_sec + off / 1000;
    while (ns < 0) {
        ns += 1000000000LL;
        s -= 1;
    }
    while (ns >= 1000000000LL) {
        ns -= 1000000000LL;
        s += 1;
    }
    ts->tv_sec = (time_t)s;
    ts->tv_nsec = (long)ns;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    int r = (int)syscall(SYS_clock_gettime, id, ts);
    if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
        shift(ts);
    }
    return r;
}

int gettimeofday(struct timeval *tv, void *tz) {
    struct timespec ts;
    int r = (int)syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
    if (r != 0) {
        return r;
    }
    shift(&ts);
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    (void)tz;
    return 0;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out != NULL) {
        *out = ts.tv_sec;
    }
    return ts.tv_sec;
}
