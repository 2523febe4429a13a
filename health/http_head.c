/*
 * http_head.c - does an HTTP check's answer leave its connection reusable
 * (check_reuse)? Reads the header lines after the status line, as the bytes
 * arrive, keeping one line at a time: a head of any length costs a fixed
 * buffer, and anything lb does not understand closes the connection rather
 * than risk reading the next answer out of step.
 */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "hc.h"

/* Header name ':' value, the value's surrounding blanks trimmed. */
static bool
hc_head_field(const char *line, size_t len, const char *name, const char **value,
              size_t *vlen)
{
    size_t nlen = strlen(name);

    if (len <= nlen || line[nlen] != ':' || strncasecmp(line, name, nlen) != 0)
        return false;
    *value = line + nlen + 1;
    *vlen = len - nlen - 1;
    while (*vlen > 0 && (**value == ' ' || **value == '\t')) {
        (*value)++;
        (*vlen)--;
    }
    while (*vlen > 0 && ((*value)[*vlen - 1] == ' ' || (*value)[*vlen - 1] == '\t'))
        (*vlen)--;
    return true;
}

/* A Connection value naming the close token, in a comma list. */
static bool
hc_head_says_close(const char *v, size_t n)
{
    for (size_t i = 0; i + 5 <= n; i++) {
        if (strncasecmp(v + i, "close", 5) == 0 &&
            (i == 0 || v[i - 1] == ',' || v[i - 1] == ' ') &&
            (i + 5 == n || v[i + 5] == ',' || v[i + 5] == ' '))
            return true;
    }
    return false;
}

/* One complete header line (CRLF removed): -1 when the connection cannot be
 * reused after this answer. */
static int
hc_head_line(struct hc_head *h, const char *line, size_t len)
{
    const char *v;
    size_t vlen;

    if (hc_head_field(line, len, "content-length", &v, &vlen)) {
        uint64_t n = 0;

        /* One plain decimal; a second Content-Length, even equal, is
         * a framing lb does not guess at. */
        if (h->content_length >= 0 || vlen == 0 || vlen > 9)
            return -1;
        for (size_t i = 0; i < vlen; i++) {
            if (!isdigit((unsigned char)v[i]))
                return -1;
            n = n * 10 + (uint64_t)(v[i] - '0');
        }
        if (n > HC_HEAD_BODY_MAX)
            return -1;
        h->content_length = (int64_t)n;
        return 0;
    }
    if (hc_head_field(line, len, "transfer-encoding", &v, &vlen))
        return -1;
    if (hc_head_field(line, len, "connection", &v, &vlen) && hc_head_says_close(v, vlen))
        return -1;
    return 0;
}

void
hc_head_init(struct hc_head *h)
{
    memset(h, 0, sizeof(*h));
    h->content_length = -1;
}

int
hc_head_feed(struct hc_head *h, const char *buf, size_t n, size_t *used)
{
    *used = 0;
    for (size_t i = 0; i < n; i++) {
        char c = buf[i];

        if (++h->head_bytes > HC_HEAD_MAX)
            return -1;
        if (c != '\n') {
            if (h->len == sizeof(h->line))
                return -1;              /* a line longer than we keep */
            h->line[h->len++] = c;
            continue;
        }
        if (h->len == 0 || h->line[h->len - 1] != '\r')
            return -1;                  /* a bare LF: not our framing */
        h->len--;
        if (h->len == 0) {              /* the empty line: the head's end */
            *used = i + 1;
            return h->content_length >= 0 ? 1 : -1;
        }
        if (hc_head_line(h, h->line, h->len) == -1)
            return -1;
        h->len = 0;
    }
    *used = n;
    return 0;
}
