/*
 * log.c - one line per event on stderr, key=value.
 *
 * Each line is formatted into a stack buffer and written with one write(2):
 * stderr lines of several threads never interleave, and a line longer than
 * the buffer is cut rather than split.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "core.h"

#define LB_LOG_LINE_MAX 2048

static _Atomic int lb_log_min_level = CONF_LOG_INFO;

uint64_t
lb_mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

double
lb_wall_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct event_base *
lb_base_new(int flags)
{
    struct event_config *cfg = event_config_new();
    struct event_base *base;

    if (cfg == NULL)
        return NULL;
    if (flags != 0)
        event_config_set_flag(cfg, flags);
    base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    return base;
}

void
lb_log_set_level(enum conf_log_level level)
{
    atomic_store_explicit(&lb_log_min_level, (int)level, memory_order_relaxed);
}

bool
lb_log_enabled(enum conf_log_level level)
{
    return (int)level >=
           atomic_load_explicit(&lb_log_min_level, memory_order_relaxed);
}

bool
lb_log_limit_take(struct lb_log_limit *l, uint32_t *held)
{
    uint64_t now = lb_mono_ms();
    uint64_t start = atomic_load_explicit(&l->window_ms, memory_order_relaxed);

    /* The thread that opens a new second resets the count; a thread that
     * loses that race counts against the new second, which is fine. */
    if ((start == 0 || now - start >= 1000) &&
        atomic_compare_exchange_strong(&l->window_ms, &start, now != 0 ? now : 1))
        atomic_store_explicit(&l->used, 0, memory_order_relaxed);
    if (atomic_fetch_add_explicit(&l->used, 1, memory_order_relaxed) >= l->per_s) {
        atomic_fetch_add_explicit(&l->held, 1, memory_order_relaxed);
        return false;
    }
    *held = atomic_exchange_explicit(&l->held, 0, memory_order_relaxed);
    return true;
}

void
lb_log_emit(enum conf_log_level level, const char *event, const char *fmt, ...)
{
    char line[LB_LOG_LINE_MAX];
    struct timeval tv;
    struct tm tm;
    size_t n;
    int rc;
    va_list ap;

    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    n = strftime(line, sizeof(line), "ts=%Y-%m-%dT%H:%M:%S", &tm);
    rc = snprintf(line + n, sizeof(line) - n, ".%03dZ level=%s event=%s ",
                  (int)(tv.tv_usec / 1000), conf_log_level_name(level), event);
    if (rc > 0)
        n += (size_t)rc;
    if (n < sizeof(line)) {
        va_start(ap, fmt);
        rc = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
        va_end(ap);
        if (rc > 0)
            n += (size_t)rc;
    }
    if (n > sizeof(line) - 2)
        n = sizeof(line) - 2;
    while (n > 0 && line[n - 1] == ' ')     /* an empty tail leaves a space */
        n--;
    line[n++] = '\n';

    /* stderr may be a pipe that a supervisor reads: retry short writes and
     * EINTR, give up on anything else (there is nowhere to report it). */
    for (size_t off = 0; off < n;) {
        ssize_t w = write(STDERR_FILENO, line + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
}

static void
lb_log_on_libevent(int severity, const char *msg)
{
    /* a message per failed accept(2), per bad request...: one a second */
    static struct lb_log_limit limit = LB_LOG_LIMIT(1);
    enum conf_log_level level = severity >= EVENT_LOG_ERR ? CONF_LOG_ERROR :
                                severity == EVENT_LOG_WARN ? CONF_LOG_WARN :
                                severity == EVENT_LOG_MSG ? CONF_LOG_INFO : CONF_LOG_DEBUG;
    char qbuf[512];

    lb_log_limited(&limit, level, "libevent", "msg=%s", lb_log_quote(qbuf, sizeof(qbuf), msg));
}

void
lb_log_route_libevent(void)
{
    event_set_log_callback(lb_log_on_libevent);
}

const char *
lb_log_quote(char *buf, size_t len, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    bool plain = *s != '\0';
    size_t o = 0;

    for (const char *p = s; *p && plain; p++)
        plain = (unsigned char)*p > ' ' && *p != '"' && *p != '\\' &&
                *p != '=' && (unsigned char)*p != 0x7f;
    if (plain || len < 3)
        return s;

    buf[o++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (o + 6 >= len)                   /* room for \xNN, quote, NUL */
            break;
        if (*p == '"' || *p == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)*p;
        } else if (*p < ' ' || *p == 0x7f) {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[*p >> 4];
            buf[o++] = hex[*p & 0xf];
        } else {
            buf[o++] = (char)*p;
        }
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}
