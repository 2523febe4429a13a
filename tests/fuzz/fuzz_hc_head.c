/*
 * fuzz_hc_head.c - check_reuse's reading of an answer's head after the
 * status line (hc_head_feed), as a server may send it.
 *
 * The input is the bytes after the status line; its first byte also picks
 * how they are split into feeds (as reads would split them). The result is
 * compared with a reference written from the rule in hc.h, applied to the
 * whole head at once: CRLF line ends only, each line at most
 * HC_HEAD_LINE_MAX bytes, the head at most HC_HEAD_MAX; reusable when it
 * has exactly one Content-Length (1 to 9 digits, at most HC_HEAD_BODY_MAX),
 * no Transfer-Encoding, and no Connection value with a "close" token. The
 * split must not change the answer, and *used must stop at the empty line.
 */
#include <strings.h>

#include "fuzz.h"
#include "hc.h"

static bool
ref_field(const char *line, size_t len, const char *name, const char **v, size_t *vlen)
{
    size_t n = strlen(name);

    if (len <= n || line[n] != ':' || strncasecmp(line, name, n) != 0)
        return false;
    *v = line + n + 1;
    *vlen = len - n - 1;
    while (*vlen && (**v == ' ' || **v == '\t'))
        (*v)++, (*vlen)--;
    while (*vlen && ((*v)[*vlen - 1] == ' ' || (*v)[*vlen - 1] == '\t'))
        (*vlen)--;
    return true;
}

static bool
ref_has_close(const char *v, size_t n)
{
    /* Split on commas and spaces; a token equal to "close". */
    size_t i = 0;

    while (i < n) {
        size_t j = i;

        while (j < n && v[j] != ',' && v[j] != ' ')
            j++;
        if (j - i == 5 && strncasecmp(v + i, "close", 5) == 0)
            return true;
        i = j + 1;
    }
    return false;
}

/* 1 reusable (with *length, *head_len), -1 not, 0 incomplete. */
static int
ref_head(const char *d, size_t size, int64_t *length, size_t *head_len)
{
    int64_t cl = -1;
    size_t start = 0;

    for (size_t i = 0; i < size; i++) {
        if (i + 1 > HC_HEAD_MAX)
            return -1;
        if (d[i] != '\n') {
            if (i - start >= HC_HEAD_LINE_MAX)
                return -1;
            continue;
        }
        if (i == start || d[i - 1] != '\r')
            return -1;
        size_t len = i - 1 - start;
        const char *line = d + start, *v;
        size_t vlen;

        if (len == 0) {
            *length = cl;
            *head_len = i + 1;
            return cl >= 0 ? 1 : -1;
        }
        if (ref_field(line, len, "content-length", &v, &vlen)) {
            int64_t x = 0;

            if (cl >= 0 || vlen == 0 || vlen > 9)
                return -1;
            for (size_t k = 0; k < vlen; k++) {
                if (v[k] < '0' || v[k] > '9')
                    return -1;
                x = x * 10 + (v[k] - '0');
            }
            if (x > HC_HEAD_BODY_MAX)
                return -1;
            cl = x;
        } else if (ref_field(line, len, "transfer-encoding", &v, &vlen)) {
            return -1;
        } else if (ref_field(line, len, "connection", &v, &vlen) && ref_has_close(v, vlen)) {
            return -1;
        }
        start = i + 1;
    }
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hc_head h;
    size_t step, off = 0, used = 0, want_head = 0;
    int64_t want_len = -1;
    int rc = 0, want;

    if (size == 0)
        return 0;
    step = (size_t)data[0] % 17 + 1;
    data++;
    size--;
    want = ref_head((const char *)data, size, &want_len, &want_head);
    hc_head_init(&h);
    while (off < size && rc == 0) {
        size_t k = size - off < step ? size - off : step;

        rc = hc_head_feed(&h, (const char *)data + off, k, &used);
        FUZZ_CHECK(used <= k);
        FUZZ_CHECK(rc != 0 || used == k);
        off += used;
    }
    FUZZ_CHECK(rc == want);
    if (rc == 1) {
        FUZZ_CHECK(off == want_head);
        FUZZ_CHECK(h.content_length == want_len);
    }
    return 0;
}
