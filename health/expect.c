/*
 * expect.c - the pure parts of an HTTP check: reading the status line,
 * matching its code against check_expect, and the verdict on the bytes of
 * an answer as they arrive. No I/O, unit-tested and fuzzed alone.
 */
#include <stdio.h>
#include <string.h>

#include "hc.h"

int
hc_parse_status_line(const char *line, size_t len, int *code, char *reason,
                     size_t reason_len)
{
    size_t i, r;
    int c;

    /* Strip the line end: "\r\n", or a bare "\n" from sloppy servers. */
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        len--;
    /* "HTTP/1.x SP 3DIGIT [SP reason]": the version must be HTTP/1.0 or
     * 1.1 (a check speaks HTTP/1.1 and accepts an HTTP/1.0 answer). */
    if (len < 12 || memcmp(line, "HTTP/1.", 7) != 0 ||
        (line[7] != '0' && line[7] != '1') || line[8] != ' ')
        return -1;
    for (i = 9; i < 12; i++) {
        if (line[i] < '0' || line[i] > '9')
            return -1;
    }
    if (len > 12 && line[12] != ' ')
        return -1;
    /* The classes HTTP defines; check_expect cannot name others either.
     * Nothing is written until the line is accepted. */
    c = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
    if (c < CONF_STATUS_MIN || c > CONF_STATUS_MAX)
        return -1;
    *code = c;
    if (reason_len == 0)
        return 0;
    /* The reason is for people: keep printable ASCII only, so a hostile
     * server cannot put control bytes into our logs. */
    r = 0;
    for (i = 13; i < len && r + 1 < reason_len; i++)
        reason[r++] = (line[i] >= ' ' && line[i] < 0x7f) ? line[i] : '?';
    reason[r] = '\0';
    return 0;
}

bool
hc_expect_match(const struct conf_expect *e, int code)
{
    for (size_t i = 0; i < e->nranges; i++) {
        if (code >= e->ranges[i].lo && code <= e->ranges[i].hi)
            return true;
    }
    return false;
}

bool
hc_status_verdict(const char *buf, size_t len, size_t cap,
                  const struct conf_expect *expect, const struct conf_expect *warn,
                  bool *passed, bool *warned, char *detail, size_t detail_len)
{
    const char *nl = memchr(buf, '\n', len);
    char reason[64];
    int code;

    *passed = false;
    if (warned != NULL)
        *warned = false;
    if (nl == NULL) {
        if (len < cap)
            return false;
        snprintf(detail, detail_len,
                 "malformed status line: no line end in %zu bytes", len);
        return true;
    }
    if (hc_parse_status_line(buf, (size_t)(nl - buf) + 1, &code, reason,
                             sizeof(reason)) == -1) {
        snprintf(detail, detail_len, "malformed status line");
        return true;
    }
    /* The detail is the status as the server said it; passed tells whether
     * check_expect accepts it, or check_warn (looked at first: alive, but
     * overloaded, which is a pass with a warning). */
    if (warn != NULL && warned != NULL && hc_expect_match(warn, code))
        *passed = *warned = true;
    else
        *passed = hc_expect_match(expect, code);
    snprintf(detail, detail_len, "HTTP %d%s%s", code, reason[0] ? " " : "",
             reason);
    return true;
}
