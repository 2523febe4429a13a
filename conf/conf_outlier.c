/*
 * conf_outlier.c - the keys of outlier detection: outlier = errors:N,
 * window:D, eject:D, max_eject:P% (its value), and first_byte_timeout
 * against it.
 *
 * The parts come in any order, each at most once. errors is required: how
 * many errors mean "broken" depends on the pool's traffic, which no
 * default knows. The others have defaults:
 *   - window 10s: Envoy's sweep interval (outlier_detection.interval);
 *   - eject 30s: Envoy's base_ejection_time;
 *   - max_eject 50%: Envoy's max_ejection_percent is 10%, which since
 *     Envoy enforces it strictly (envoyproxy/envoy#27909; the old "at least
 *     one host" came back as the opt-in always_eject_one_host, #34796)
 *     ejects nobody in a pool of fewer than 10 servers, and lb's pools are
 *     often 2 to 10; HAProxy's observe/on-error has no cap at all. Half
 *     lets one of two go and never empties a pool; min_servers still
 *     guards its floor. 0% detects and logs, and never ejects.
 * The bounds: window and eject 100ms..1h (the daemon ticks every 100 ms;
 * an hour-long ejection doubled to 10x is already ten hours), errors
 * 1..1000 (balancer/outlier.c counts in uint16_t buckets).
 *
 * first_byte_timeout is refused without outlier, as conf_check_protocol
 * refuses a check's key under another check: it only names when a silent
 * server counts as an outlier error (no_first_byte), it closes nothing,
 * and without outlier it would be ignored.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "conf.h"
#include "conf_keys.h"
#include "conf_parse.h"
#include "conf_value.h"

#define CONF_OUTLIER_ERRORS_MAX 1000
#define CONF_OUTLIER_MS_MIN 100
#define CONF_OUTLIER_MS_MAX (3600u * 1000u)

enum conf_outlier_part {
    CONF_OUTLIER_ERRORS = 0,
    CONF_OUTLIER_WINDOW,
    CONF_OUTLIER_EJECT,
    CONF_OUTLIER_MAX_EJECT,
    CONF_OUTLIER_PARTS
};

static const char *const conf_outlier_parts[CONF_OUTLIER_PARTS] = {
    [CONF_OUTLIER_ERRORS] = "errors",
    [CONF_OUTLIER_WINDOW] = "window",
    [CONF_OUTLIER_EJECT] = "eject",
    [CONF_OUTLIER_MAX_EJECT] = "max_eject",
};

#define CONF_OUTLIER_USE "use errors:N, window:D, eject:D, max_eject:P%"

static int
conf_outlier_part_find(const char *name, size_t n)
{
    for (int i = 0; i < CONF_OUTLIER_PARTS; i++)
        if (strlen(conf_outlier_parts[i]) == n && strncasecmp(name, conf_outlier_parts[i], n) == 0)
            return i;
    return -1;
}

/* "NAME:VALUE" without the blanks around either, into name and value
 * (without a colon, value is empty). */
static void
conf_outlier_split(const char *item, size_t n, char *name, char *value, size_t size)
{
    const char *colon = memchr(item, ':', n);
    const char *a = item, *b = colon ? colon : item + n;
    const char *c = colon ? colon + 1 : item + n, *d = item + n;

    while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
        b--;
    while (c < d && (*c == ' ' || *c == '\t'))
        c++;
    snprintf(name, size, "%.*s", (int)(b - a), a);
    snprintf(value, size, "%.*s", (int)(d - c), c);
}

static int
conf_outlier_duration(const char *part, const char *v, uint64_t *out, char *err, size_t errlen)
{
    char msg[192];

    if (conf_parse_duration(v, out, msg, sizeof(msg)) != 0) {
        snprintf(err, errlen, "%s %s", part, msg);
        return -1;
    }
    if (*out < CONF_OUTLIER_MS_MIN || *out > CONF_OUTLIER_MS_MAX) {
        snprintf(err, errlen, "%s %s is out of range (100ms..1h)", part, v);
        return -1;
    }
    return 0;
}

/* One part's value, known to be non-empty. */
static int
conf_outlier_value(int part, const char *v, struct conf_outlier *o, char *err, size_t errlen)
{
    char msg[192];
    uint64_t n;
    size_t len = strlen(v);

    switch (part) {
    case CONF_OUTLIER_ERRORS:
        if (conf_parse_uint(v, &n, msg, sizeof(msg)) != 0) {
            snprintf(err, errlen, "errors %s", msg);
            return -1;
        }
        if (n < 1 || n > CONF_OUTLIER_ERRORS_MAX) {
            snprintf(err, errlen, "errors %s is out of range (1..%d)", v,
                     CONF_OUTLIER_ERRORS_MAX);
            return -1;
        }
        o->errors = (uint32_t)n;
        return 0;
    case CONF_OUTLIER_WINDOW:
        return conf_outlier_duration("window", v, &o->window_ms, err, errlen);
    case CONF_OUTLIER_EJECT:
        return conf_outlier_duration("eject", v, &o->eject_ms, err, errlen);
    default: {
        char digits[64];

        /* a percentage only: a count of servers would change meaning as
         * the pool grows */
        snprintf(digits, sizeof(digits), "%.*s", len > 0 ? (int)len - 1 : 0, v);
        if (len < 2 || v[len - 1] != '%' || conf_parse_uint(digits, &n, msg, sizeof(msg)) != 0) {
            snprintf(err, errlen, "max_eject \"%s\" is not a percentage (e.g. 50%%)", v);
            return -1;
        }
        if (n > 100) {
            snprintf(err, errlen, "max_eject %s is out of range (0%%..100%%)", v);
            return -1;
        }
        o->max_eject_percent = (uint32_t)n;
        return 0;
    }
    }
}

int
conf_parse_outlier(const char *s, struct conf_outlier *out, char *err, size_t errlen)
{
    struct conf_outlier o = { .errors = 0, .window_ms = 10000, .eject_ms = 30000,
                              .max_eject_percent = 50 };
    bool seen[CONF_OUTLIER_PARTS] = { false };
    const char *p = s, *item;
    bool more = true;

    if (s[strspn(s, " \t")] == '\0') {
        memset(out, 0, sizeof(*out));           /* off */
        return 0;
    }
    while (more) {
        size_t n = conf_list_next(&p, &item, &more);
        char name[256], value[256];             /* an INI line is 200 bytes */
        int part;

        if (n == 0) {
            snprintf(err, errlen, "\"%s\" has an empty part (%s, separated by commas)", s,
                     CONF_OUTLIER_USE);
            return -1;
        }
        conf_outlier_split(item, n, name, value, sizeof(name));
        part = conf_outlier_part_find(name, strlen(name));
        if (part < 0) {
            /* the name alone when there is one: "foo" of foo:1 */
            if (name[0] != '\0')
                snprintf(err, errlen, "unknown part \"%s\" (%s)", name, CONF_OUTLIER_USE);
            else
                snprintf(err, errlen, "unknown part \"%.*s\" (%s)", (int)n, item,
                         CONF_OUTLIER_USE);
            return -1;
        }
        if (seen[part]) {
            snprintf(err, errlen, "%s is given twice", conf_outlier_parts[part]);
            return -1;
        }
        seen[part] = true;
        if (value[0] == '\0') {
            snprintf(err, errlen, "%s needs a value after a colon (%s)",
                     conf_outlier_parts[part], CONF_OUTLIER_USE);
            return -1;
        }
        if (conf_outlier_value(part, value, &o, err, errlen) != 0)
            return -1;
    }
    if (!seen[CONF_OUTLIER_ERRORS]) {
        snprintf(err, errlen, "errors:N is required (e.g. errors:5, window:10s, eject:30s, "
                 "max_eject:50%%)");
        return -1;
    }
    *out = o;
    return 0;
}

void
conf_check_outlier(struct conf_parse *p, const struct conf_pool *pool,
                   const struct conf_lines *l)
{
    int koutlier = conf_key_find(CONF_SECTION_POOL, "outlier");
    int kfirst = conf_key_find(CONF_SECTION_POOL, "first_byte_timeout");

    if (l->bad[koutlier] || l->bad[kfirst])
        return;
    if (pool->first_byte_timeout_ms > 0 && pool->outlier.errors == 0)
        conf_error(p, l->key[kfirst], "first_byte_timeout needs outlier (it says when a "
                   "silent server counts as an outlier error, and closes nothing)");
}
