/*
 * conf_ini.c - the file's text, through inih, into struct conf.
 *
 * The only file that includes <ini.h>. The packaged libinih is built with
 * its defaults: a 200-byte line buffer on the stack, indented lines taken as
 * continuations of the previous value, no line number passed to the handler
 * (INI_HANDLER_LINENO must stay undefined here: defining it would change the
 * handler type the prebuilt library calls), section names cut at 49 bytes,
 * and no call for a section without keys. So our reader, which inih calls
 * once per line just before handling that line, does the line-level work:
 * it counts lines, rejects what inih would split or misread, and tracks
 * section headers itself. The handler then only sees KEY = VALUE lines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "conf.h"
#include "conf_keys.h"
#include "conf_parse.h"
#include "conf_value.h"

static char *conf_ini_read(char *str, int num, void *stream);
static const char *conf_ini_separator(const char *s);
static void conf_ini_header(struct conf_parse *p, const char *s);
static void conf_ini_add(struct conf_parse *p, enum conf_section_kind kind,
                         const char *name);
static int conf_ini_on_key(void *user, const char *section, const char *name,
                           const char *value);

static const char conf_ini_headers[] =
    "[global] [health] [admin] [frontend NAME] [pool NAME]";

void
conf_ini_parse(struct conf_parse *p)
{
    int rc;

    p->cur_kind = CONF_SECTION_NONE;
    p->pos = 0;
    p->lineno = 0;
    /* inih would skip a UTF-8 byte order mark too, but our reader looks at
     * the line first. */
    if (p->len >= 3 && memcmp(p->buf, "\xef\xbb\xbf", 3) == 0)
        p->pos = 3;
    rc = ini_parse_stream(conf_ini_read, p, conf_ini_on_key, p);
    /* The reader hands inih only lines it accepts and the handler never
     * fails, so inih should find nothing; if it does, say so rather than
     * load a file we misread. */
    if (rc != 0 && p->nerrors == 0 && !p->oom)
        conf_error(p, rc > 0 ? rc : 0, "cannot be parsed (inih error %d)",
                   rc);
}

static int
conf_ini_is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Hands inih the next line of p->buf in str (num bytes), as fgets would,
 * after checking it. A rejected line is reported here and replaced by an
 * empty one, so inih neither splits it nor calls the handler for it. */
static char *
conf_ini_read(char *str, int num, void *stream)
{
    struct conf_parse *p = stream;
    const char *line, *nl, *start, *end;
    size_t n, len;
    bool indented;

    if (p->pos >= p->len)
        return NULL;
    line = p->buf + p->pos;
    nl = memchr(line, '\n', p->len - p->pos);
    n = nl ? (size_t)(nl - line) + 1 : p->len - p->pos;
    p->pos += n;
    p->lineno++;
    len = nl ? n - 1 : n;
    if (len > 0 && line[len - 1] == '\r')
        len--;

    start = line;
    end = line + len;
    while (start < end && conf_ini_is_blank(*start))
        start++;
    while (end > start && conf_ini_is_blank(end[-1]))
        end--;
    str[0] = '\0';

    /* inih reads at most num - 1 bytes per call: with its line end and the
     * NUL, a longer line would reach the handler in two pieces. */
    if (n + 1 > (size_t)num) {
        conf_error(p, p->lineno, "line is too long (%zu characters, at most "
                   "%zu)", len, (size_t)num - 1 - (n - len));
        p->has_content = true;
        if (*start == '[')
            p->cur_kind = CONF_SECTION_SKIP;    /* we lost the header */
        return str;
    }
    if (start == end || *start == ';' || *start == '#')
        return str;             /* blank or comment: nothing for inih */
    p->has_content = true;

    /* inih would append an indented line to the previous key's value. */
    indented = start > line;
    if (indented)
        conf_error(p, p->lineno, "indentation is not allowed (continuation "
                   "lines are not supported; start each line in column 1)");

    /* Indented or not, the line itself is still checked as if it were not,
     * so one stray space costs one message, not the rest of the section. */
    memcpy(str, start, (size_t)(end - start));
    str[end - start] = '\0';
    if (*start == '[') {
        conf_ini_header(p, str);
        str[0] = '\0';
        return str;
    }
    if (*conf_ini_separator(str) != '=') {
        if (!indented)
            conf_error(p, p->lineno, "expected KEY = VALUE, found \"%s\"",
                       str);
        str[0] = '\0';
    } else if (str[0] == '=') {
        conf_error(p, p->lineno, "missing key name before =");
        str[0] = '\0';
    }
    return str;
}

/* Where inih will split a KEY = VALUE line: the first '=' or ':', unless an
 * inline comment (';' after a blank) comes first. inih accepts ':' too; we
 * do not, so "listen 127.0.0.1:80" is caught instead of becoming a key
 * named "listen 127.0.0.1". */
static const char *
conf_ini_separator(const char *s)
{
    bool was_blank = false;

    while (*s != '\0' && *s != '=' && *s != ':' && !(was_blank && *s == ';')) {
        was_blank = conf_ini_is_blank(*s);
        s++;
    }
    return s;
}

/* s: a trimmed line starting with '['. Sets the section the next keys go
 * to, or CONF_SECTION_SKIP when the header is unusable. */
static void
conf_ini_header(struct conf_parse *p, const char *s)
{
    const char *close, *after, *in, *in_end, *word_end, *name;
    char namebuf[256];
    size_t nword;
    int kind;

    p->cur_kind = CONF_SECTION_SKIP;
    close = s + 1;
    while (*close != '\0' && *close != ']' &&
           !(*close == ';' && conf_ini_is_blank(close[-1])))
        close++;
    if (*close != ']') {
        conf_error(p, p->lineno, "section header \"%s\" has no closing ]", s);
        return;
    }
    after = close + 1;
    while (conf_ini_is_blank(*after))
        after++;
    if (*after != '\0' && *after != ';' && *after != '#')
        conf_error(p, p->lineno, "unexpected text \"%s\" after the section "
                   "header", after);

    in = s + 1;
    in_end = close;
    while (in < in_end && conf_ini_is_blank(*in))
        in++;
    while (in_end > in && conf_ini_is_blank(in_end[-1]))
        in_end--;
    word_end = in;
    while (word_end < in_end && !conf_ini_is_blank(*word_end))
        word_end++;
    nword = (size_t)(word_end - in);
    name = word_end;
    while (name < in_end && conf_ini_is_blank(*name))
        name++;
    /* Lines are shorter than namebuf: the reader rejected longer ones. */
    snprintf(namebuf, sizeof(namebuf), "%.*s", (int)(in_end - name), name);

    for (kind = 0; kind < CONF_SECTION_KINDS; kind++) {
        const char *kn = conf_section_kind_name(kind);
        if (strlen(kn) == nword && memcmp(kn, in, nword) == 0)
            break;
    }
    if (kind == CONF_SECTION_KINDS) {
        conf_error(p, p->lineno, "unknown section [%.*s] (valid headers: %s)",
                   (int)(in_end - in), in, conf_ini_headers);
        return;
    }

    if (kind < CONF_SECTION_FRONTEND) {
        struct conf_lines *l = &p->single[kind];
        if (namebuf[0] != '\0')
            conf_error(p, p->lineno, "[%s] takes no name, found \"%s\"",
                       conf_section_kind_name(kind), namebuf);
        if (l->header != 0)
            conf_error(p, p->lineno, "[%s] is already defined at line %d",
                       conf_section_kind_name(kind), l->header);
        else
            l->header = p->lineno;
        p->cur_kind = kind;
        return;
    }
    if (namebuf[0] == '\0') {
        conf_error(p, p->lineno, "[%s] needs a name: [%s NAME]",
                   conf_section_kind_name(kind),
                   conf_section_kind_name(kind));
        return;
    }
    /* A bad name is reported but kept, so that references to it do not
     * add "does not exist" errors for the same cause. */
    if (!conf_name_is_valid(namebuf))
        conf_error(p, p->lineno, "%s name \"%s\" is invalid (use 1 to %d of "
                   "A-Z a-z 0-9 _ . -)", conf_section_kind_name(kind),
                   namebuf, CONF_NAME_MAX);
    conf_ini_add(p, kind, namebuf);
}

/* Appends a frontend or pool named name and makes it the current section.
 * Its conf_lines entry grows in step, at the same index. */
static void
conf_ini_add(struct conf_parse *p, enum conf_section_kind kind,
             const char *name)
{
    struct conf *c = p->c;
    bool is_pool = kind == CONF_SECTION_POOL;
    size_t *n = is_pool ? &c->npools : &c->nfrontends;
    size_t *cap = is_pool ? &p->pools_cap : &p->frontends_cap;
    struct conf_lines **lines = is_pool ? &p->pool_lines : &p->frontend_lines;
    char *copy;

    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 4;
        struct conf_lines *nl;
        void *objs = is_pool ? realloc(c->pools, ncap * sizeof(*c->pools))
                             : realloc(c->frontends,
                                       ncap * sizeof(*c->frontends));
        if (objs == NULL) {
            p->oom = true;
            return;
        }
        if (is_pool)
            c->pools = objs;
        else
            c->frontends = objs;
        nl = realloc(*lines, ncap * sizeof(**lines));
        if (nl == NULL) {
            p->oom = true;
            return;
        }
        *lines = nl;
        *cap = ncap;
    }
    copy = strdup(name);
    if (copy == NULL) {
        p->oom = true;
        return;
    }
    if (is_pool) {
        memset(&c->pools[*n], 0, sizeof(c->pools[*n]));
        c->pools[*n].name = copy;
        c->pools[*n].line = p->lineno;
    } else {
        memset(&c->frontends[*n], 0, sizeof(c->frontends[*n]));
        c->frontends[*n].name = copy;
        c->frontends[*n].line = p->lineno;
    }
    memset(&(*lines)[*n], 0, sizeof((*lines)[*n]));
    (*lines)[*n].header = p->lineno;
    p->cur_kind = kind;
    p->cur_index = (*n)++;
}

/* inih's callback for each KEY = VALUE line, right after the reader handed
 * it that line, so p->lineno is its line. Always returns 1 ("go on"): the
 * errors are ours, and inih keeps going either way. */
static int
conf_ini_on_key(void *user, const char *section, const char *name,
                const char *value)
{
    struct conf_parse *p = user;
    const struct conf_key *keys;
    struct conf_lines *lines;
    char err[512];
    size_t nkeys;
    void *obj;
    int i;

    (void)section;              /* truncated by inih; p->cur_kind is ours */
    if (p->cur_kind == CONF_SECTION_SKIP)
        return 1;
    if (p->cur_kind == CONF_SECTION_NONE) {
        conf_error(p, p->lineno, "key \"%s\" is outside any section (put "
                   "it under one of %s)", name, conf_ini_headers);
        return 1;
    }
    i = conf_key_find(p->cur_kind, name);
    if (i < 0) {
        if (p->cur_kind < CONF_SECTION_FRONTEND)
            conf_error(p, p->lineno, "unknown key \"%s\" in [%s]", name,
                       conf_section_kind_name(p->cur_kind));
        else
            conf_error(p, p->lineno, "unknown key \"%s\" in [%s %s]", name,
                       conf_section_kind_name(p->cur_kind),
                       p->cur_kind == CONF_SECTION_POOL
                           ? p->c->pools[p->cur_index].name
                           : p->c->frontends[p->cur_index].name);
        return 1;
    }
    obj = conf_parse_object(p, p->cur_kind, p->cur_index, &lines);
    keys = conf_keys_of(p->cur_kind, &nkeys);
    if (lines->key[i] != 0 && !(keys[i].flags & CONF_KEY_REPEATABLE)) {
        conf_error(p, p->lineno, "%s: already set at line %d", name,
                   lines->key[i]);
        return 1;
    }
    if (lines->key[i] == 0)
        lines->key[i] = p->lineno;
    if (conf_key_set(&keys[i], obj, value, p->lineno, err, sizeof(err)) != 0) {
        lines->bad[i] = 1;
        conf_error(p, p->lineno, "%s", err);
    }
    return 1;
}
