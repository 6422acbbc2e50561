/* Preloaded into a counted redis-server (bench/harness/callgrind.py): the two inputs Redis
 * takes from outside its calls, pinned, so one commit's calls execute the same instructions.
 *
 * - The wall clock stands still at PINNED_MS. A stream id (XADD *) is the clock's millisecond,
 *   and its encoding's length follows the gap to the last id; a key's expiry is a stamp.
 *   The monotonic clock still runs, so the timers (serverCron) fire as they would.
 * - random() starts from one seed. Redis seeds it with the start's time and pid, and a
 *   sorted set's node levels come from it, so each ZADD's walk did too.
 *
 * libfaketime would pin the clock, but it hangs at start with a jemalloc-linked Redis
 * (its clock_gettime recurses while jemalloc initialises), hence this file.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef PINNED_MS
#error "build with -DPINNED_MS=<ms>: callgrind.py passes the fixed inputs' start"
#endif
#define SEED 1u

struct pinned_timeval {
    long tv_sec;
    long tv_usec;
};

/* Declared without <sys/time.h>: its prototype's time zone type differs between glibc versions. */
int gettimeofday(struct pinned_timeval *tv, void *tz) {
    (void)tz;
    if (tv) {
        tv->tv_sec = (long)(PINNED_MS / 1000);
        tv->tv_usec = (long)(PINNED_MS % 1000) * 1000;
    }
    return 0;
}

time_t time(time_t *out) {
    time_t now = (time_t)(PINNED_MS / 1000);
    if (out)
        *out = now;
    return now;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    if (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE) {
        ts->tv_sec = (time_t)(PINNED_MS / 1000);
        ts->tv_nsec = (long)(PINNED_MS % 1000) * 1000000L;
        return 0;
    }
    /* The kernel's own answer for every other clock: no lookup of the next symbol, which
     * would allocate while the allocator itself may be asking for the time. */
    return (int)syscall(SYS_clock_gettime, clock, ts);
}

/* glibc's rand() and random() share one state: either seeding call sets it to SEED. */
static char state[128];

void srandom(unsigned int seed) {
    (void)seed;
    initstate(SEED, state, sizeof state);
}

void srand(unsigned int seed) {
    srandom(seed);
}
