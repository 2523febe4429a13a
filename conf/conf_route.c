/*
 * conf_route.c - route = PATTERN POOL: the patterns a frontend routes TLS
 * clients by, and the match of a client's SNI against them.
 *
 * A pattern is an exact name, "*." and a name (a wildcard of exactly one
 * label, as a certificate's, RFC 6125 section 6.4.3), or "*". Kept lower
 * case without a trailing dot, and sorted, a match is at most three binary
 * searches: the name, "*." and the name without its first label, "*". No
 * two patterns can then match one name equally well, so the order of the
 * lines does not matter; only the same pattern twice is an error
 * (conf_check).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "conf_value.h"

#define CONF_LABEL_MAX 63

bool
conf_host_normalise(const char *s, size_t len, char *out)
{
    size_t label = 0;

    if (len > 0 && s[len - 1] == '.')
        len--;
    if (len == 0 || len > CONF_HOST_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c == '.') {
            if (label == 0)
                return false;
            label = 0;
        } else if (isalnum(c) || c == '-' || c == '_') {
            if (++label > CONF_LABEL_MAX)
                return false;
        } else {
            return false;
        }
        out[i] = (char)tolower(c);
    }
    out[len] = '\0';
    return label != 0;
}

int
conf_parse_route(const char *s, struct conf_route *out, char *err, size_t errlen)
{
    char pattern[CONF_HOST_MAX + 3], pool[CONF_NAME_MAX + 1];
    const char *pat = s, *rest, *end;
    size_t plen, pool_len;

    memset(out, 0, sizeof(*out));
    plen = conf_next_token(&pat);
    rest = pat + plen;
    pool_len = conf_next_token(&rest);
    end = rest + pool_len;
    if (plen == 0 || pool_len == 0 || conf_next_token(&end) != 0) {
        snprintf(err, errlen, "\"%s\" is not PATTERN POOL (a name, \"*.NAME\" or \"*\", "
                 "then the pool)", s);
        return -1;
    }
    if (plen == 1 && pat[0] == '*') {
        strcpy(pattern, "*");
    } else if (plen > 2 && pat[0] == '*' && pat[1] == '.' &&
               conf_host_normalise(pat + 2, plen - 2, pattern + 2)) {
        memcpy(pattern, "*.", 2);
    } else if (!conf_host_normalise(pat, plen, pattern)) {
        snprintf(err, errlen, "\"%.*s\" is not a host name, \"*.NAME\" or \"*\" (labels of "
                 "1 to 63 of A-Z a-z 0-9 - _, at most %d bytes; a \"*\" only as the whole "
                 "first label)", (int)plen, pat, CONF_HOST_MAX);
        return -1;
    }
    if (pool_len <= CONF_NAME_MAX) {
        memcpy(pool, rest, pool_len);
        pool[pool_len] = '\0';
    }
    if (pool_len > CONF_NAME_MAX || !conf_name_is_valid(pool)) {
        snprintf(err, errlen, "pool \"%.*s\" is not a valid name (use 1 to %d of A-Z a-z "
                 "0-9 _ . -)", (int)pool_len, rest, CONF_NAME_MAX);
        return -1;
    }
    out->pattern = strdup(pattern);
    out->pool_name = strdup(pool);
    if (out->pattern == NULL || out->pool_name == NULL) {
        free(out->pattern);
        free(out->pool_name);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

static int
conf_route_cmp(const void *a, const void *b)
{
    const struct conf_route *x = a, *y = b;
    int d = strcmp(x->pattern, y->pattern);

    /* Equal patterns keep the file's order: the later line is the one
     * conf_check reports. */
    return d != 0 ? d : (x->line > y->line) - (x->line < y->line);
}

void
conf_routes_sort(struct conf_routes *r)
{
    if (r->n > 1)
        qsort(r->v, r->n, sizeof(*r->v), conf_route_cmp);
}

static int
conf_route_find(const struct conf_routes *r, const char *pattern)
{
    size_t lo = 0, hi = r->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int d = strcmp(r->v[mid].pattern, pattern);

        if (d == 0)
            return (int)mid;
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

int
conf_route_match(const struct conf_frontend *fe, const char *name)
{
    char wild[CONF_HOST_MAX + 3];
    const char *dot;
    int i;

    if (name[0] == '\0')
        return -1;
    if ((i = conf_route_find(&fe->routes, name)) >= 0)
        return i;
    if ((dot = strchr(name, '.')) != NULL && strlen(dot) + 1 < sizeof(wild)) {
        snprintf(wild, sizeof(wild), "*%s", dot);
        if ((i = conf_route_find(&fe->routes, wild)) >= 0)
            return i;
    }
    return conf_route_find(&fe->routes, "*");
}
