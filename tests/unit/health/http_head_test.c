/* Tests health/http_head.c: whether an HTTP check's answer leaves its
 * connection reusable (check_reuse), fed whole and byte by byte. */
#include <string.h>

#include "check.h"
#include "hc.h"

/* Feeds s in pieces of step bytes; returns the verdict, *used counting from
 * the start of s. */
static int
feed(const char *s, size_t step, size_t *used, int64_t *length)
{
    struct hc_head h;
    size_t n = strlen(s), off = 0, u = 0;
    int rc = 0;

    hc_head_init(&h);
    while (off < n && rc == 0) {
        size_t k = n - off < step ? n - off : step;

        rc = hc_head_feed(&h, s + off, k, &u);
        off += u;
    }
    *used = off;
    *length = h.content_length;
    return rc;
}

/* want_body: bytes of s after the head (1 only). */
static void
check_both(const char *s, int want, size_t want_body, int64_t want_len)
{
    size_t want_used = strlen(s) - want_body;

    size_t steps[] = { 1, 2, 7, 4096 };

    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        size_t used;
        int64_t len;
        int rc = feed(s, steps[i], &used, &len);

        CHECK_EQ_INT(rc, want);
        if (want == 1) {
            CHECK_EQ_INT((long long)used, (long long)want_used);
            CHECK_EQ_INT((long long)len, (long long)want_len);
        }
    }
}

static void
test_reusable(void)
{
    check_both("Content-Length: 3\r\nServer: x\r\n\r\nok\n", 1, 3, 3);
    check_both("content-length:0\r\n\r\n", 1, 0, 0);
    check_both("Content-Length:  12 \r\nConnection: keep-alive\r\n\r\n", 1, 0, 12);
    /* "close" only as a token of the Connection list */
    check_both("Connection: closed-captions\r\nContent-Length: 0\r\n\r\n", 1, 0, 0);
    check_both("X-Connection: close\r\nContent-Length: 0\r\n\r\n", 1, 0, 0);
}

static void
test_not_reusable(void)
{
    /* no length: the body ends with the connection */
    check_both("Server: x\r\n\r\n", -1, 0, 0);
    check_both("Content-Length: 0\r\nConnection: close\r\n\r\n", -1, 0, 0);
    check_both("Content-Length: 0\r\nConnection: keep-alive, Close\r\n\r\n", -1, 0, 0);
    check_both("Transfer-Encoding: chunked\r\n\r\n", -1, 0, 0);
    check_both("Content-Length: 2\r\nContent-Length: 2\r\n\r\n", -1, 0, 0);
    check_both("Content-Length: -1\r\n\r\n", -1, 0, 0);
    check_both("Content-Length: 1e3\r\n\r\n", -1, 0, 0);
    check_both("Content-Length: \r\n\r\n", -1, 0, 0);
    check_both("Content-Length: 65537\r\n\r\n", -1, 0, 0);
    check_both("Content-Length: 99999999999999999999\r\n\r\n", -1, 0, 0);
    check_both("Content-Length: 0\n\n", -1, 0, 0);     /* bare LF */
}

static void
test_bounds(void)
{
    char big[HC_HEAD_MAX + 64];
    size_t used;
    int64_t len;

    /* a header line longer than the one kept */
    memset(big, 'a', HC_HEAD_LINE_MAX + 10);
    strcpy(big + HC_HEAD_LINE_MAX + 10, "\r\nContent-Length: 0\r\n\r\n");
    CHECK_EQ_INT(feed(big, 4096, &used, &len), -1);
    /* a head longer than HC_HEAD_MAX, in short lines */
    big[0] = '\0';
    while (strlen(big) + 8 < HC_HEAD_MAX + 20)
        strcat(big, "X: 1\r\n");
    strcat(big, "\r\n");
    CHECK_EQ_INT(feed(big, 1, &used, &len), -1);
    /* incomplete: need more */
    CHECK_EQ_INT(feed("Content-Length: 0\r\n", 3, &used, &len), 0);
    CHECK_EQ_INT(feed("Content-Length: 0\r\n\r", 4096, &used, &len), 0);
}

int
main(void)
{
    test_reusable();
    test_not_reusable();
    test_bounds();
    return CHECK_DONE();
}
