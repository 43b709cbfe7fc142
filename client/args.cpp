#include "client/args.h"

#include <algorithm>
#include <cctype>
#include <iostream>

#include "common/protocol.h"  // kDefaultSocketPath

namespace ckprof {
namespace {

// Word-wraps `text` to `width` columns; continuation lines start with `indent` spaces.
std::string Wrap(const std::string& text, size_t width, size_t indent, size_t first_col = 0) {
  std::string out, word;
  size_t col = first_col;
  auto flush = [&] {
    if (word.empty()) return;
    if (col > indent && col + 1 + word.size() > width) {
      out += "\n" + std::string(indent, ' ');
      col = indent;
    } else if (col > first_col || (col > indent)) {
      out += ' ';
      ++col;
    }
    out += word;
    col += word.size();
    word.clear();
  };
  for (char c : text) {
    if (c == ' ') {
      flush();
    } else {
      word += c;
    }
  }
  flush();
  return out;
}

}  // namespace

ArgParser::ArgParser(std::string command, std::string summary, std::string details)
    : command_(std::move(command)), summary_(std::move(summary)), details_(std::move(details)) {}

void ArgParser::Flag(std::string name, bool* target, std::string help) {
  specs_.push_back(
      Spec{std::move(name), "", std::move(help), target, nullptr, nullptr, false, false, ""});
}

void ArgParser::Option(std::string name, std::string* target, std::string metavar,
                       std::string help) {
  specs_.push_back(Spec{std::move(name), std::move(metavar), std::move(help), nullptr, target,
                        nullptr, false, false, ""});
}

void ArgParser::RepeatedOption(std::string name, std::vector<std::string>* target,
                               std::string metavar, std::string help) {
  specs_.push_back(Spec{std::move(name), std::move(metavar), std::move(help), nullptr, nullptr,
                        target, false, false, ""});
}

void ArgParser::Positional(std::string name, std::string* target, bool required, std::string help) {
  specs_.push_back(
      Spec{std::move(name), "", std::move(help), nullptr, target, nullptr, required, true, ""});
}

void ArgParser::Positionals(std::string name, std::vector<std::string>* target, bool required,
                            std::string help) {
  specs_.push_back(
      Spec{std::move(name), "", std::move(help), nullptr, nullptr, target, required, true, ""});
}

void ArgParser::Alias(std::string short_name, const std::string& long_name) {
  for (auto& s : specs_) {
    if (!s.positional && s.name == long_name) s.alias = std::move(short_name);
  }
}

bool ArgParser::Given(const std::string& name) const {
  return std::find(given_.begin(), given_.end(), name) != given_.end();
}

std::optional<int> ArgParser::Parse(const std::vector<std::string>& args) {
  auto usage_error = [&](const std::string& msg) {
    std::cerr << command_ << ": " << msg << " (see '" << command_ << " --help')\n";
    return 2;
  };
  size_t next_positional = 0;
  std::vector<const Spec*> positionals;
  for (const auto& s : specs_) {
    if (s.positional) positionals.push_back(&s);
  }
  bool only_positional = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (!only_positional && (a == "--help" || a == "-h")) {
      std::cout << Help();
      return 0;
    }
    if (!only_positional && a == "--") {
      only_positional = true;
      continue;
    }
    if (!only_positional && a.size() > 1 && a[0] == '-' && !(a.size() > 1 && std::isdigit(a[1]))) {
      std::string name = a, value;
      bool has_value = false;
      if (auto eq = a.find('='); eq != std::string::npos) {
        name = a.substr(0, eq);
        value = a.substr(eq + 1);
        has_value = true;
      }
      auto it = std::find_if(specs_.begin(), specs_.end(), [&](const Spec& s) {
        return !s.positional && (s.name == name || s.alias == name);
      });
      if (it == specs_.end()) return usage_error("unknown option " + name);
      name = it->name;
      given_.push_back(name);
      if (it->flag) {
        if (has_value) return usage_error("option " + name + " takes no value");
        *it->flag = true;
        continue;
      }
      if (!has_value) {
        if (i + 1 >= args.size()) return usage_error("option " + name + " needs a value");
        value = args[++i];
      }
      if (it->values) {
        it->values->push_back(value);
      } else {
        *it->value = value;
      }
      continue;
    }
    if (next_positional < positionals.size() && positionals[next_positional]->values) {
      positionals[next_positional]->values->push_back(a);  // it takes the rest: stay on it
      if (!Given(positionals[next_positional]->name)) {
        given_.push_back(positionals[next_positional]->name);
      }
      continue;
    }
    if (next_positional >= positionals.size()) {
      return usage_error("unexpected argument '" + a + "'");
    }
    const Spec* p = positionals[next_positional++];
    *p->value = a;
    given_.push_back(p->name);
  }
  for (size_t i = next_positional; i < positionals.size(); ++i) {
    if (positionals[i]->required && !Given(positionals[i]->name)) {
      return usage_error("missing " + positionals[i]->name);
    }
  }
  return std::nullopt;
}

std::string ArgParser::Help() const {
  std::string usage = "usage: " + command_;
  for (const auto& s : specs_) {
    if (!s.positional) continue;
    const std::string name = s.values ? s.name + "..." : s.name;
    usage += s.required ? " " + name : " [" + name + "]";
  }
  usage += " [options]\n\n" + Wrap(summary_, 78, 0) + "\n";
  std::string pos, opt;
  auto line = [](std::string left, const std::string& help) {
    left = "  " + left;
    if (left.size() < 26) {
      left.resize(26, ' ');
    } else {
      left += "\n" + std::string(26, ' ');
    }
    return left + Wrap(help, 78, 26, 26) + "\n";
  };
  for (const auto& s : specs_) {
    if (s.positional) {
      pos += line(s.name, s.help);
    } else {
      const std::string names = s.alias.empty() ? s.name : s.alias + ", " + s.name;
      opt += line(s.flag ? names : names + " " + s.metavar, s.help);
    }
  }
  std::string out = usage;
  if (!pos.empty()) out += "\narguments:\n" + pos;
  out += "\noptions:\n" + opt + line("-h, --help", "show this help and exit");
  out += "\nglobal options (before or after the command):\n" +
         line("--socket PATH", "the daemon's socket (default: $CKPROF_SOCKET, else " +
                                   std::string(kDefaultSocketPath) + ")");
  if (!details_.empty()) out += "\n" + details_ + (details_.back() == '\n' ? "" : "\n");
  return out;
}

}  // namespace ckprof
