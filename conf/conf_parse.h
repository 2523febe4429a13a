/*
 * conf_parse.h - the state of one conf_load call (internal to conf/).
 *
 * conf.c reads the file and owns the error list, conf_ini.c feeds the text
 * through inih into struct conf, conf_check.c runs the checks that need
 * the whole file. All of it lives on conf_load's stack: no globals, so two
 * threads may load two files at once.
 */
#ifndef CONF_PARSE_H
#define CONF_PARSE_H

#include <stdbool.h>
#include <stddef.h>

#include "conf.h"
#include "conf_keys.h"

/* Where each key of one section object was set, which parse-time struct
 * conf does not keep: "not set" (0) must stay distinct from "set to the
 * default" to report duplicates, and the checks need the key's line. */
struct conf_lines {
    int header;                     /* line of the [header], 0 = not seen */
    int key[CONF_KEYS_MAX];         /* first line that set key i, 0 = unset */
    unsigned char bad[CONF_KEYS_MAX];   /* a value of key i was rejected */
};

struct conf_error {
    int line;                       /* 0 = about the whole file */
    size_t seq;                     /* keeps equal lines in found order */
    char *text;                     /* "FILE:LINE: message" */
};

struct conf_parse {
    const char *file;               /* as given: the prefix of messages */
    struct conf *c;

    /* the file, read whole, and the reader's position in it */
    char *buf;
    size_t len;
    size_t cap;                     /* of buf, without its NUL */
    size_t pos;
    int lineno;                     /* of the line inih is handling */
    bool has_content;               /* a line other than blank or comment */

    /* the section the next key belongs to */
    int cur_kind;                   /* enum conf_section_kind, or below */
    size_t cur_index;               /* into c->frontends or c->pools */

    struct conf_lines single[CONF_SECTION_FRONTEND];   /* global .. admin */
    struct conf_lines *frontend_lines;  /* parallel to c->frontends */
    struct conf_lines *pool_lines;      /* parallel to c->pools */
    size_t frontends_cap;
    size_t pools_cap;

    struct conf_error *errors;
    size_t nerrors;
    size_t errors_cap;
    size_t nerrors_dropped;         /* past CONF_ERRORS_MAX */
    bool oom;
};

#define CONF_SECTION_NONE (-1)      /* before the first header */
#define CONF_SECTION_SKIP (-2)      /* under a rejected header: its keys are
                                       not checked, to avoid one error per
                                       line for a single cause */
#define CONF_ERRORS_MAX 100

/* Records "FILE:LINE: message" (or "FILE: message" when line is 0). */
void conf_error(struct conf_parse *p, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The struct of section kind/index (index only for frontends and pools)
 * and, in *lines, where its keys were set. */
void *conf_parse_object(struct conf_parse *p, int kind, size_t index,
                        struct conf_lines **lines);

/* Runs inih over p->buf, filling p->c. Errors go to conf_error. */
void conf_ini_parse(struct conf_parse *p);

/* The checks that need the whole file; run after the defaults are merged.
 * Also resolves each frontend's pool_index. */
void conf_check(struct conf_parse *p);
/* first_byte_timeout against outlier (conf_outlier.c). */
void conf_check_outlier(struct conf_parse *p, const struct conf_pool *pool,
                        const struct conf_lines *l);
/* The datagram checks' keys of one pool against its check (conf_dgram.c). */
void conf_check_dgram(struct conf_parse *p, const struct conf_pool *pool,
                      const struct conf_lines *l);

#endif /* CONF_PARSE_H */
