/*
 * saved.c - a server's state as the state file keeps it (state_file): one
 * line per server, written at exit and read at the next start, so that a
 * restart forgets neither a server that is down nor one an operator took
 * out. Pure: lines in, structs out; the daemon reads and writes the file.
 *
 *   lb-state 1 1796150000.123
 *   server web web1 10.0.0.1:8080 health=down successes=0 failures=3 admin=none down_ms=4200
 *
 * The header's number is the format, then the unix time of writing. Names
 * and addresses have no blanks (the config's own rules); a line that is
 * not exactly this shape is an error, and the reader then ignores the file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bal.h"

#define BAL_SAVED_MAGIC "lb-state 1 "

int
bal_saved_header(const char *line, double *written_at)
{
    char *end;
    double t;

    if (strncmp(line, BAL_SAVED_MAGIC, sizeof(BAL_SAVED_MAGIC) - 1) != 0)
        return -1;
    line += sizeof(BAL_SAVED_MAGIC) - 1;
    if (*line < '0' || *line > '9')
        return -1;
    t = strtod(line, &end);
    if (*end != '\0' || t < 0)
        return -1;
    *written_at = t;
    return 0;
}

size_t
bal_saved_format_header(char *buf, size_t len, double written_at)
{
    int n = snprintf(buf, len, BAL_SAVED_MAGIC "%.3f\n", written_at);

    return n > 0 && (size_t)n < len ? (size_t)n : 0;
}

size_t
bal_saved_format(char *buf, size_t len, const struct bal_saved *s)
{
    int n = snprintf(buf, len, "server %s %s %s health=%s successes=%u failures=%u admin=%s "
                     "down_ms=%llu\n", s->pool, s->name, s->addr,
                     bal_health_state_name(s->health), s->successes, s->failures,
                     bal_admin_name(s->admin), (unsigned long long)s->down_ms);

    return n > 0 && (size_t)n < len ? (size_t)n : 0;
}

/* Copies the next blank-separated word of *p into dst (cap bytes); -1 when
 * there is none or it does not fit. */
static int
bal_saved_word(const char **p, char *dst, size_t cap)
{
    const char *s = *p, *e;

    if (*s != ' ')
        return -1;
    s++;
    e = strchr(s, ' ');
    if (e == NULL)
        e = s + strlen(s);
    if (e == s || (size_t)(e - s) >= cap)
        return -1;
    memcpy(dst, s, (size_t)(e - s));
    dst[e - s] = '\0';
    *p = e;
    return 0;
}

/* key=VALUE as a count below 2^32 (or 2^64 for down_ms). */
static int
bal_saved_count(const char *word, const char *key, uint64_t max, uint64_t *out)
{
    size_t k = strlen(key);
    char *end;
    unsigned long long v;

    if (strncmp(word, key, k) != 0 || word[k] != '=' || word[k + 1] < '0' || word[k + 1] > '9')
        return -1;
    if (word[k + 1] == '0' && word[k + 2] != '\0')
        return -1;                      /* one spelling per number */
    errno = 0;
    v = strtoull(word + k + 1, &end, 10);
    if (*end != '\0' || errno == ERANGE || v > max)
        return -1;
    *out = v;
    return 0;
}

int
bal_saved_parse(const char *line, struct bal_saved *out, char *err, size_t errlen)
{
    static const enum bal_health_state healths[] = {
        BAL_HEALTH_UP, BAL_HEALTH_DOWN, BAL_HEALTH_WARNING,
    };
    static const enum bal_admin admins[] = {
        BAL_ADMIN_NONE, BAL_ADMIN_DRAIN, BAL_ADMIN_DISABLE,
    };
    struct bal_saved s;
    char word[64];
    const char *p = line;
    uint64_t v;
    bool found = false;

    memset(&s, 0, sizeof(s));
    if (strncmp(p, "server", 6) != 0) {
        snprintf(err, errlen, "not a server line");
        return -1;
    }
    p += 6;
    if (bal_saved_word(&p, s.pool, sizeof(s.pool)) == -1 ||
        bal_saved_word(&p, s.name, sizeof(s.name)) == -1 ||
        bal_saved_word(&p, s.addr, sizeof(s.addr)) == -1) {
        snprintf(err, errlen, "expected: server POOL NAME ADDRESS ...");
        return -1;
    }
    if (bal_saved_word(&p, word, sizeof(word)) == -1 || strncmp(word, "health=", 7) != 0) {
        snprintf(err, errlen, "expected health=");
        return -1;
    }
    for (size_t i = 0; i < sizeof(healths) / sizeof(healths[0]) && !found; i++) {
        found = strcmp(word + 7, bal_health_state_name(healths[i])) == 0;
        s.health = healths[i];
    }
    if (!found) {
        snprintf(err, errlen, "health= must be up, down or warning");
        return -1;
    }
    if (bal_saved_word(&p, word, sizeof(word)) == -1 ||
        bal_saved_count(word, "successes", UINT32_MAX, &v) == -1) {
        snprintf(err, errlen, "expected successes=N");
        return -1;
    }
    s.successes = (uint32_t)v;
    if (bal_saved_word(&p, word, sizeof(word)) == -1 ||
        bal_saved_count(word, "failures", UINT32_MAX, &v) == -1) {
        snprintf(err, errlen, "expected failures=N");
        return -1;
    }
    s.failures = (uint32_t)v;
    found = false;
    if (bal_saved_word(&p, word, sizeof(word)) == -1 || strncmp(word, "admin=", 6) != 0) {
        snprintf(err, errlen, "expected admin=");
        return -1;
    }
    for (size_t i = 0; i < sizeof(admins) / sizeof(admins[0]) && !found; i++) {
        found = strcmp(word + 6, bal_admin_name(admins[i])) == 0;
        s.admin = admins[i];
    }
    if (!found) {
        snprintf(err, errlen, "admin= must be none, drain or disable");
        return -1;
    }
    if (bal_saved_word(&p, word, sizeof(word)) == -1 ||
        bal_saved_count(word, "down_ms", UINT64_MAX, &s.down_ms) == -1 || *p != '\0') {
        snprintf(err, errlen, "expected down_ms=N at the end");
        return -1;
    }
    *out = s;
    return 0;
}
