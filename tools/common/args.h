// The CLI's one command-line parser. Each command declares its options (names, the variable a value
// goes into, help text) and positional arguments, then calls parse(), which handles, the same way
// for every command:
//   --name VALUE                 the value converted by the target's kind (int, unsigned, float, string,
//                                comma-separated list of ints or of names) and stored;
//   --flag                       a flag sets its bool;
//   --help, -h                   the command's usage on stdout, exit status 0;
//   an unknown option, a missing value, a value that is not a number or out of range, or one
//   positional argument too many: "error: ..." and the command's usage on stderr, exit status 2.
// The checks a command makes after parse() (a required option, a range) go through check() or
// fail(), so that every invalid command line ends the same way.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

namespace cli_args {

class parser {
  public:
    // `synopsis`: the usage lines ("usage: llama-cancel CMD ...\n"), printed before the options.
    explicit parser(std::string synopsis);

    // `names`: the option's spellings separated by '|', e.g. "--model|-m". `metavar` names the value
    // in the usage. The target's value when declared is shown as the default.
    parser & option(const char * names, std::string * target, const char * metavar, const char * help);
    parser & option(const char * names, int * target, const char * metavar, const char * help);
    parser & option(const char * names, uint32_t * target, const char * metavar, const char * help);
    parser & option(const char * names, float * target, const char * metavar, const char * help);
    // Comma-separated ints.
    parser & option(const char * names, std::vector<int> * target, const char * metavar, const char * help);
    // Comma-separated names; "none" (and empty items) left out, so "none" is the empty list.
    parser & option(const char * names, std::vector<std::string> * target, const char * metavar,
                    const char * help);
    // A value `convert` stores itself; it returns an error text ("" when the value is good).
    parser & option(const char * names, std::function<std::string(const char *)> convert, const char * metavar,
                    const char * help, std::string default_text = "");
    // A flag: present sets *target to `value`.
    parser & flag(const char * names, bool * target, bool value, const char * help);
    // The next argument not starting with '-' goes into *target (declared in order).
    parser & positional(const char * metavar, std::string * target, const char * help);

    // Returns -1 when the command goes on, else the exit status to return at once (0 after --help,
    // 2 after a command-line error, its message and the usage printed on stderr).
    int parse(int argc, char ** argv);

    // "error: MESSAGE" and the usage on stderr; returns 2, the exit status of a command-line error.
    int fail(const std::string & message) const;

    // A check after parse(): `found` is true when the command line has the problem `message` says.
    struct problem {
        bool        found;
        std::string message;
    };
    // The first problem found, through fail(): 2; -1 (the command goes on) when none is.
    int check(std::initializer_list<problem> problems) const;

    // The synopsis and the options, with their help and defaults.
    void print_usage(std::FILE * out) const;

    // Value conversions (the parser's own, for options of the `convert` kind): "" or the error text.
    static std::string to_int(const char * s, long long lo, long long hi, long long * out);
    static std::string to_float(const char * s, float * out);

  private:
    struct opt {
        std::vector<std::string>                   names;
        std::string                                metavar; // empty: a byte
        std::string                                help;
        std::string                                default_text;
        std::function<std::string(const char *)>   set;     // for a byte, called with nullptr
    };
    struct pos {
        std::string   metavar;
        std::string   help;
        std::string * target;
    };

    parser & add(const char * names, const char * metavar, const char * help, std::string default_text,
                 std::function<std::string(const char *)> set);
    const opt * find(const std::string & name) const;

    std::string      synopsis_;
    std::vector<opt> opts_;
    std::vector<pos> pos_;
};

} // namespace cli_args
