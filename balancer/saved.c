/*
 * saved.c - a server's state as the state file keeps it (state_file): one
 * line per server, written at exit and read at the next start, so that a
 * restart forgets neither a server that is down nor one an operator took
 * out. Pure: lines in, structs out; the daemon reads and writes the file.
 *
 *   lb-state 1 1796150000.123
 *   server web web1 10.0.0.1:8080 health=down successes=0 failures=3 admin=none down_ms=4200
 *
 * The header's number is the format, then the unix time of writing. The
 * lines are two kinds of bal_lines.h: files of older versions read as they
 * did, and a line that is not exactly this shape is an error (the reader
 * then ignores the file).
 */
#include <string.h>

#include "bal.h"
#include "bal_lines.h"

/* The states a file holds: starting and pending are not saved. */
static const char *const bal_saved_healths[] = {
    [BAL_HEALTH_UP] = "up", [BAL_HEALTH_DOWN] = "down", [BAL_HEALTH_WARNING] = "warning",
};
static const char *const bal_saved_admins[] = {
    [BAL_ADMIN_NONE] = "none", [BAL_ADMIN_DRAIN] = "drain", [BAL_ADMIN_DISABLE] = "disable",
};

static const struct bal_line_field bal_saved_fields[] = {
    BAL_LINE_WORD_FIELD("pool", struct bal_saved, pool),
    BAL_LINE_WORD_FIELD("name", struct bal_saved, name),
    BAL_LINE_WORD_FIELD("address", struct bal_saved, addr),
    BAL_LINE_ENUM_FIELD("health=", struct bal_saved, health, bal_saved_healths),
    BAL_LINE_UINT_FIELD("successes=", struct bal_saved, successes, 0, UINT32_MAX),
    BAL_LINE_UINT_FIELD("failures=", struct bal_saved, failures, 0, UINT32_MAX),
    BAL_LINE_ENUM_FIELD("admin=", struct bal_saved, admin, bal_saved_admins),
    BAL_LINE_UINT_FIELD("down_ms=", struct bal_saved, down_ms, 0, UINT64_MAX),
};
static const struct bal_line_kind bal_saved_kind = BAL_LINE_KIND("server", bal_saved_fields);

struct bal_saved_head {
    uint64_t written_ms;                /* unix time */
};

/* The year 5138: far enough, and a double holds each millisecond below
 * it, so that the time read is the time written. */
#define BAL_SAVED_TIME_MAX_MS UINT64_C(100000000000000)

static const struct bal_line_field bal_saved_head_fields[] = {
    BAL_LINE_MILLIS_FIELD("time", struct bal_saved_head, written_ms, BAL_SAVED_TIME_MAX_MS),
};
static const struct bal_line_kind bal_saved_head_kind =
    BAL_LINE_KIND("lb-state 1", bal_saved_head_fields);

int
bal_saved_header(const char *line, double *written_at)
{
    struct bal_saved_head h;
    char err[80];

    if (bal_line_parse(line, &bal_saved_head_kind, &h, err, sizeof(err)) == -1)
        return -1;
    *written_at = (double)h.written_ms / 1000;
    return 0;
}

size_t
bal_saved_format_header(char *buf, size_t len, double written_at)
{
    /* ms to the nearest, as "%.3f" rounded; a clock before 1970 as 0 (an
     * old file at the next start), one past the bound not written (0) */
    struct bal_saved_head h = {
        !(written_at > 0) ? 0
        : written_at < 1e15 ? (uint64_t)(written_at * 1000 + 0.5) : UINT64_MAX,
    };

    return bal_line_format(buf, len, &bal_saved_head_kind, &h);
}

size_t
bal_saved_format(char *buf, size_t len, const struct bal_saved *s)
{
    return bal_line_format(buf, len, &bal_saved_kind, s);
}

int
bal_saved_parse(const char *line, struct bal_saved *out, char *err, size_t errlen)
{
    struct bal_saved s;

    memset(&s, 0, sizeof(s));
    if (bal_line_parse(line, &bal_saved_kind, &s, err, errlen) == -1)
        return -1;
    *out = s;
    return 0;
}
