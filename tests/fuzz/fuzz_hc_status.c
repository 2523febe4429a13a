/*
 * fuzz_hc_status.c - what an HTTP check reads from a server: the status
 * line (hc_parse_status_line) and the verdict on the answer as its bytes
 * arrive (hc_status_verdict, which the probe calls after every read).
 *
 * The input is the server's answer. The line parser's result is compared
 * with a reference written from the grammar in expect.c: "HTTP/1.0" or
 * "HTTP/1.1", one space, three digits 100..599, then nothing or a space
 * and the reason, line ends stripped; a refused line writes nothing. The
 * verdict must come at the first line end (or at the 255-byte cap), be the
 * same whichever prefix first decides it, and its detail must be
 * printable ASCII: it goes into log lines and /stats.
 */
#include "fuzz.h"
#include "hc.h"

#define FUZZ_CAP 255            /* the probe's HC_STATUS_LINE_MAX */
#define FUZZ_REASON 64          /* the probe's reason buffer */

static bool
ref_status_line(const char *line, size_t len, int *code, char *reason,
                size_t reason_len)
{
    size_t r = 0;

    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        len--;
    if (len < 12 || (memcmp(line, "HTTP/1.0 ", 9) != 0 &&
                     memcmp(line, "HTTP/1.1 ", 9) != 0))
        return false;
    *code = 0;
    for (size_t i = 9; i < 12; i++) {
        if (line[i] < '0' || line[i] > '9')
            return false;
        *code = *code * 10 + (line[i] - '0');
    }
    if ((len > 12 && line[12] != ' ') || *code < 100 || *code > 599)
        return false;
    if (reason_len == 0)
        return true;
    for (size_t i = 13; i < len && r + 1 < reason_len; i++)
        reason[r++] = line[i] >= 0x20 && line[i] < 0x7f ? line[i] : '?';
    reason[r] = '\0';
    return true;
}

static void
fuzz_line(const char *data, size_t size, size_t reason_len)
{
    char reason[FUZZ_REASON] = "untouched";
    char want_reason[FUZZ_REASON] = "untouched";
    int code = -7, want_code = 0;
    bool ok = ref_status_line(data, size, &want_code, want_reason,
                              reason_len);

    if (hc_parse_status_line(data, size, &code, reason, reason_len) != 0) {
        FUZZ_CHECK(!ok);
        FUZZ_CHECK(code == -7 && strcmp(reason, "untouched") == 0);
        return;
    }
    FUZZ_CHECK(ok && code == want_code);
    FUZZ_CHECK(strcmp(reason, want_reason) == 0);
}

static void
fuzz_verdict(const char *data, size_t size)
{
    struct conf_expect e = { .nranges = 1, .ranges = { { 200, 399 } } };
    const char *nl = memchr(data, '\n', size < FUZZ_CAP ? size : FUZZ_CAP);
    size_t decided_at = nl ? (size_t)(nl - data) + 1 : FUZZ_CAP;
    char first[HC_DETAIL_MAX] = "", detail[HC_DETAIL_MAX];
    char reason[FUZZ_REASON];
    bool first_passed = false, passed;
    int code;

    for (size_t n = 0; n <= size && n <= FUZZ_CAP; n++) {
        bool done = hc_status_verdict(data, n, FUZZ_CAP, &e, NULL, &passed, NULL, detail,
                                      sizeof(detail));

        FUZZ_CHECK(done == (n >= decided_at));
        if (!done)
            continue;
        for (const char *q = detail; *q != '\0'; q++)
            FUZZ_CHECK(*q >= 0x20 && *q < 0x7f);
        if (n == decided_at) {
            strcpy(first, detail);
            first_passed = passed;
            /* passed exactly when the line holds a code 200..399 */
            FUZZ_CHECK(passed == (nl != NULL &&
                                  ref_status_line(data, decided_at, &code,
                                                  reason, sizeof(reason)) &&
                                  code >= 200 && code <= 399));
        } else {
            FUZZ_CHECK(passed == first_passed && strcmp(detail, first) == 0);
        }
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;

    fuzz_line(s, size, FUZZ_REASON);
    fuzz_line(s, size, size % 4);      /* tiny and empty reason buffers */
    fuzz_verdict(s, size);
    return 0;
}
