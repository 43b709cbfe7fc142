// ArgParser: the small command-line parser every `ckprof` command uses, so that all of them
// accept `--opt VALUE` and `--opt=VALUE`, print the same style of --help, and report usage
// errors the same way (one line naming the problem and pointing at --help, exit 2).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ckprof {

class ArgParser {
 public:
  // `command` is e.g. "ckprof convert"; `summary` the first line of --help; `details` is
  // printed after the option list (examples, defaults, notes).
  ArgParser(std::string command, std::string summary, std::string details = "");

  // --name (no value). The target is set to true when present.
  void Flag(std::string name, bool* target, std::string help);
  // --name VALUE. `metavar` names the value in --help ("FILE").
  void Option(std::string name, std::string* target, std::string metavar, std::string help);
  // --name VALUE, which may be given again: each value is appended to `target`.
  void RepeatedOption(std::string name, std::vector<std::string>* target, std::string metavar,
                      std::string help);
  // A positional argument, in declaration order.
  void Positional(std::string name, std::string* target, bool required, std::string help);
  // The last positional may take every remaining argument ("JOB..."); `required`: at least one.
  void Positionals(std::string name, std::vector<std::string>* target, bool required,
                   std::string help);
  // `short_name` ("-f") is another name of the option `long_name` ("--follow"), declared before.
  void Alias(std::string short_name, const std::string& long_name);
  // Marks which options were given on the command line (for "flag overrides file" logic).
  bool Given(const std::string& name) const;

  // Parses args (those after the command name). Returns nullopt to go on, or an exit code:
  // 0 after printing --help, 2 after a usage error (printed to stderr).
  std::optional<int> Parse(const std::vector<std::string>& args);

  // The command's help: usage, arguments, options, the global options every command takes
  // (--socket), then the details.
  std::string Help() const;

 private:
  struct Spec {
    std::string name;
    std::string metavar;
    std::string help;
    bool* flag = nullptr;
    std::string* value = nullptr;
    std::vector<std::string>* values = nullptr;  // a positional taking the remaining arguments
    bool required = false;
    bool positional = false;
    std::string alias;  // a short name ("-f")
  };
  std::string command_, summary_, details_;
  std::vector<Spec> specs_;
  std::vector<std::string> given_;
};

}  // namespace ckprof
