/*
 * fuzz_conf_expect.c - check_expect lists (conf_parse_expect) and the
 * matcher the checks use on them (hc_expect_match).
 *
 * The parser's answer is compared with a reference written from the
 * documented grammar (conf_value.h): comma-separated items, blanks around
 * them allowed, each a code or LO-HI within 100..599 with LO <= HI, at most
 * CONF_EXPECT_MAX_RANGES items. Then every code from 0 to 1000 must match
 * exactly when it is in one of the items.
 */
#include "conf_value.h"
#include "fuzz.h"
#include "hc.h"

static bool
ref_code(const char *s, size_t n, unsigned *code)
{
    unsigned v = 0;

    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        if (v <= 1000)          /* past the range anyway: stop growing */
            v = v * 10 + (unsigned)(s[i] - '0');
    }
    *code = v;
    return v >= CONF_STATUS_MIN && v <= CONF_STATUS_MAX;
}

static bool
ref_expect(const char *s, struct conf_expect *e)
{
    const char *p = s;

    memset(e, 0, sizeof(*e));
    for (;;) {
        const char *end = strchr(p, ',');
        const char *stop = end ? end : p + strlen(p);
        const char *dash;
        unsigned lo, hi;

        while (p < stop && (*p == ' ' || *p == '\t'))
            p++;
        while (stop > p && (stop[-1] == ' ' || stop[-1] == '\t'))
            stop--;
        dash = memchr(p, '-', (size_t)(stop - p));
        if (dash == NULL) {
            if (!ref_code(p, (size_t)(stop - p), &lo))
                return false;
            hi = lo;
        } else if (!ref_code(p, (size_t)(dash - p), &lo) ||
                   !ref_code(dash + 1, (size_t)(stop - dash - 1), &hi) ||
                   lo > hi) {
            return false;
        }
        if (e->nranges == CONF_EXPECT_MAX_RANGES)
            return false;
        e->ranges[e->nranges].lo = (uint16_t)lo;
        e->ranges[e->nranges].hi = (uint16_t)hi;
        e->nranges++;
        if (end == NULL)
            return true;
        p = end + 1;
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_string(data, size);
    struct conf_expect got, want;
    char err[256];
    bool ok = ref_expect(s, &want);

    memset(&got, 0xa5, sizeof(got));
    if (conf_parse_expect(s, &got, err, sizeof(err)) != 0) {
        FUZZ_CHECK(!ok);
        fuzz_check_message(err, sizeof(err));
        /* a refused list leaves the output as it was */
        for (size_t i = 0; i < sizeof(got); i++)
            FUZZ_CHECK(((unsigned char *)&got)[i] == 0xa5);
        free(s);
        return 0;
    }
    FUZZ_CHECK(ok && got.nranges == want.nranges);
    for (size_t i = 0; i < got.nranges; i++) {
        FUZZ_CHECK(got.ranges[i].lo == want.ranges[i].lo);
        FUZZ_CHECK(got.ranges[i].hi == want.ranges[i].hi);
    }
    for (int code = 0; code <= 1000; code++) {
        bool in = false;

        for (size_t i = 0; i < want.nranges; i++)
            in = in || (code >= want.ranges[i].lo && code <= want.ranges[i].hi);
        FUZZ_CHECK(hc_expect_match(&got, code) == in);
    }
    free(s);
    return 0;
}
