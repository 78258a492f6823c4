import ArgumentParser
import FileManagerCore

/// A bundle identifier given on the command line. An invalid one is a usage error (exit
/// status 2), as a wrong option is; over the control socket the same check is EINVAL.
func identifierArgument(_ raw: String) throws -> BundleIdentifier {
    do {
        return try DaemonRequests.identifier(raw)
    } catch {
        throw ValidationError(error.description)
    }
}
