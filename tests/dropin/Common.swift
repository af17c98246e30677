import Foundation

/// Prints and flushes at once, so lines from a case that ends with exit() are not lost.
func say(_ line: String) {
    print(line)
    fflush(stdout)
}
