/*
 * fuzz_conf_number.c - the number parsers of config values: durations
 * (conf_parse_duration and its inverse conf_format_duration), counts
 * (conf_parse_uint) and count-or-percent (conf_parse_count_or_percent).
 *
 * Each input is given to all three and the answer compared with a
 * reference written from the documented grammar (conf_value.h), so a value
 * taken wrongly or refused wrongly fails, not only a crash. A duration
 * that parses must come back the same through conf_format_duration.
 */
#include "conf_value.h"
#include "fuzz.h"

/* The grammar's value: digits only, at least one; *v set unless it does
 * not fit in 64 bits (then *fits is false). */
static bool
ref_digits(const char *s, size_t n, uint64_t *v, bool *fits)
{
    *v = 0;
    *fits = true;
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        if (*fits && (__builtin_mul_overflow(*v, 10, v) ||
                      __builtin_add_overflow(*v, (uint64_t)(s[i] - '0'), v)))
            *fits = false;
    }
    return true;
}

/* N (digits) and a unit of ms, s, m or h; a bare N only when it is 0. */
static bool
ref_duration(const char *s, uint64_t *ms)
{
    static const struct { const char *unit; uint64_t ms; } units[] = {
        { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 },
    };
    size_t n = 0;
    uint64_t v;
    bool fits;

    while (s[n] >= '0' && s[n] <= '9')
        n++;
    if (!ref_digits(s, n, &v, &fits) || !fits)
        return false;
    if (s[n] == '\0') {
        *ms = 0;
        return v == 0;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(s + n, units[i].unit) == 0)
            return !__builtin_mul_overflow(v, units[i].ms, ms);
    }
    return false;
}

static void
fuzz_duration(const char *s)
{
    char err[256], text[32];
    uint64_t ms = 7, want = 0, back = 0;
    bool ok = ref_duration(s, &want);

    if (conf_parse_duration(s, &ms, err, sizeof(err)) != 0) {
        FUZZ_CHECK(!ok);
        fuzz_check_message(err, sizeof(err));
        FUZZ_CHECK(ms == 7);
        return;
    }
    FUZZ_CHECK(ok && ms == want);
    /* the form a range message shows it in reads back as the same value */
    conf_format_duration(ms, text, sizeof(text));
    FUZZ_CHECK(conf_parse_duration(text, &back, err, sizeof(err)) == 0);
    FUZZ_CHECK(back == ms);
}

static void
fuzz_uint(const char *s)
{
    uint64_t v = 7, want;
    char err[256];
    bool fits, ok = ref_digits(s, strlen(s), &want, &fits) && fits;

    if (conf_parse_uint(s, &v, err, sizeof(err)) != 0) {
        FUZZ_CHECK(!ok);
        fuzz_check_message(err, sizeof(err));
        FUZZ_CHECK(v == 7);
        return;
    }
    FUZZ_CHECK(ok && v == want);
}

static void
fuzz_count_or_percent(const char *s)
{
    struct conf_count_or_percent out = { 7, false };
    size_t n = strlen(s);
    bool is_percent = n > 0 && s[n - 1] == '%';
    uint64_t want;
    bool fits, ok;
    char err[256];

    ok = ref_digits(s, is_percent ? n - 1 : n, &want, &fits) && fits &&
         want <= UINT32_MAX && (!is_percent || want <= 100);
    if (conf_parse_count_or_percent(s, &out, err, sizeof(err)) != 0) {
        FUZZ_CHECK(!ok);
        fuzz_check_message(err, sizeof(err));
        FUZZ_CHECK(out.value == 7 && !out.is_percent);
        return;
    }
    FUZZ_CHECK(ok && out.value == want && out.is_percent == is_percent);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_string(data, size);

    fuzz_duration(s);
    fuzz_uint(s);
    fuzz_count_or_percent(s);
    free(s);
    return 0;
}
