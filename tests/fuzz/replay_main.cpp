// Replays fuzz inputs without libFuzzer: calls the target's LLVMFuzzerTestOneInput on every
// file of the directories (or files) given. A broken invariant aborts, which fails the test.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path where = argv[i];
    if (std::filesystem::is_directory(where)) {
      for (const auto& entry : std::filesystem::recursive_directory_iterator(where))
        if (entry.is_regular_file())
          inputs.push_back(entry.path());
    } else if (std::filesystem::exists(where)) {
      inputs.push_back(where);
    } else {
      std::cerr << "replay: no such file or directory: " << where << "\n";
      return 2;
    }
  }
  if (inputs.empty()) {
    std::cerr << "replay: no inputs\n";
    return 2;
  }
  for (const auto& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::cout << "replay " << path.string() << " (" << bytes.size() << " bytes)" << std::endl;
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  std::cout << "replayed " << inputs.size() << " inputs\n";
  return 0;
}
