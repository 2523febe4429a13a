/*
 * conf_keys.h - the table of keys of each section kind (internal to conf/).
 *
 * One entry per key: its name, value type, where it lands in the section
 * struct, its default and bounds. conf_key_set is the one generic setter
 * the INI handler calls for every key; conf_keys_merge fills the defaults
 * of the keys a section left unset. Adding a key is adding a table row.
 * Pure: no state, any thread.
 */
#ifndef CONF_KEYS_H
#define CONF_KEYS_H

#include <stddef.h>
#include <stdint.h>

enum conf_section_kind {
    CONF_SECTION_GLOBAL = 0,        /* struct conf_global */
    CONF_SECTION_HEALTH,            /* struct conf_health */
    CONF_SECTION_ADMIN,             /* struct conf_admin */
    CONF_SECTION_FRONTEND,          /* struct conf_frontend, [frontend NAME] */
    CONF_SECTION_POOL,              /* struct conf_pool, [pool NAME] */
    CONF_SECTION_KINDS
};

enum conf_type {
    CONF_TYPE_COUNT = 0,            /* uint32_t, bounds min..max */
    CONF_TYPE_DURATION,             /* uint64_t ms, bounds min..max in ms */
    CONF_TYPE_ENUM,                 /* an enum, index into names[] */
    CONF_TYPE_STRING,               /* char *, anything */
    CONF_TYPE_WORD,                 /* char *, no blanks (goes in a header) */
    CONF_TYPE_PATH,                 /* char *, starts with '/', no blanks */
    CONF_TYPE_NAME,                 /* char *, [A-Za-z0-9_.-]{1,63} */
    CONF_TYPE_LISTEN,               /* struct conf_addr, "*" allowed */
    CONF_TYPE_BOOL,                 /* bool */
    CONF_TYPE_COUNT_OR_PERCENT,     /* struct conf_count_or_percent */
    CONF_TYPE_EXPECT,               /* struct conf_expect */
    CONF_TYPE_SERVER,               /* appends to struct conf_pool.servers */
    CONF_TYPE_HOSTS,                /* struct conf_hosts */
    CONF_TYPE_ADDR,                 /* struct conf_addr, "" = unset (len 0) */
    CONF_TYPE_CIDRS,                /* struct conf_cidrs, "" only with
                                       CONF_KEY_MAY_BE_EMPTY */
    CONF_TYPE_RATE,                 /* uint32_t per second, "N/s", bounds
                                       min..max on N */
    CONF_TYPE_ROUTE,                /* appends to struct conf_routes */
    CONF_TYPE_DNS_TYPE,             /* uint16_t, a type name or TYPEnnn */
    CONF_TYPE_DNS_RCODES,           /* uint16_t, a bit per RCODE named */
    CONF_TYPE_BYTES,                /* struct conf_bytes, "" = len 0 */
    CONF_TYPE_OUTLIER,              /* struct conf_outlier, "" = off */
    CONF_TYPES
};

#define CONF_KEY_REPEATABLE 0x1u    /* may appear many times per section */
#define CONF_KEY_REQUIRED 0x2u      /* no default: the section must set it */
#define CONF_KEY_MAY_BE_EMPTY 0x4u  /* a list that may be empty (check_warn,
                                       allow) */

/* Enough for the longest table (pool); a static assertion keeps it so. */
#define CONF_KEYS_MAX 56

struct conf_key {
    const char *name;
    enum conf_type type;
    size_t offset;                  /* into the section struct */
    const char *def;                /* default as the file would write it,
                                       parsed by the same setter; NULL when
                                       required or repeatable */
    uint64_t min, max;              /* COUNT, DURATION, COUNT_OR_PERCENT,
                                       RATE */
    const char *const *names;       /* ENUM: NULL-terminated */
    unsigned flags;                 /* CONF_KEY_* */
};

/* The kind's name as in its header: "global", ..., "pool". */
const char *conf_section_kind_name(enum conf_section_kind kind);

/* The kind's key table and its length. */
const struct conf_key *conf_keys_of(enum conf_section_kind kind, size_t *n);

/* The index of key name in the kind's table, or -1. */
int conf_key_find(enum conf_section_kind kind, const char *name);

/* Parses value with k's type and stores it into section object obj (for
 * SERVER, obj is the struct conf_pool and line is stored in the server).
 * Returns 0, or -1 and a complete message for after "FILE:LINE: ", which
 * starts with the key's name: check_interval: "10q" is not a duration ...
 * Strings are malloc'd; conf_free frees them. */
int conf_key_set(const struct conf_key *k, void *obj, const char *value,
                 int line, char *err, size_t errlen);

/* Sets the default of every key of obj whose key_line[i] is 0 (unset).
 * Returns 0, or -1 with a message when out of memory. */
int conf_keys_merge(enum conf_section_kind kind, void *obj,
                    const int *key_line, char *err, size_t errlen);

#endif /* CONF_KEYS_H */
