import Foundation
import StratusModel

/// The rules a new password must meet, checked on sign-up, when an admin creates a user and when an
/// admin sets a user's password.
///
/// Counted on the password as typed:
/// - 8 to 72 bytes (bcrypt reads no further than 72) and at least 8 characters;
/// - no control characters (NUL, tabs, newlines).
///
/// Checked on the password folded (``fold(_:)``: Unicode compatibility normalization, NFKC, then
/// lowercase, so `ＰＡＳＳＷＯＲＤ` is checked as `password`):
/// - not one character repeated (`aaaaaaaa`);
/// - not one of the most common passwords (``commonPasswords``);
/// - not a short pattern repeated to fill it (`abababab`, `abcabcab`, `asdfasdf`: a unit of at most
///   half its length, the last repetition possibly cut short);
/// - not a run along the digits, the alphabet or a row of the keyboard, forwards or backwards
///   (`12345678`, `zyxwvuts`, `qwertyui`; see ``runs``);
/// - not one of those three patterns with one character added anywhere (`11111112`, `aaaaaaab`,
///   `12345679`, `abcabXcab`): removing any one character must not leave a pattern;
/// - not the username, not containing it (when it is 3 characters or more), and not the username
///   reversed.
///
/// Only the checks use the folded form: the stored hash is of the password as typed.
enum PasswordPolicy {
    /// The reason `password` is refused, or `nil` when it is acceptable. `username` is the account's,
    /// when known (`nil` skips the username rules).
    static func violation(of password: String, username: String?) -> String? {
        if password.count < 8 { return "password must be at least 8 characters" }
        if password.utf8.count > 72 { return "password must be at most 72 bytes (the bcrypt limit)" }
        if password.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return "password must not contain control characters"
        }
        let folded = fold(password)
        let characters = Array(folded)
        if Set(characters).count == 1 { return "password must not be one character repeated" }
        if commonPasswords.contains(folded) {
            return "password is one of the most common passwords; choose another"
        }
        if let pattern = Pattern(characters) { return "password must not be \(pattern.description)" }
        if let pattern = Pattern(oneCharacterAddedTo: characters) {
            return "password must not be \(pattern.description), even with one character added"
        }
        if let username = username.map({ fold($0) }), !username.isEmpty {
            if folded == username { return "password must not be the username" }
            if username.count >= 3, folded.contains(username) { return "password must not contain the username" }
            if folded == String(username.reversed()) { return "password must not be the username reversed" }
        }
        return nil
    }

    /// `text` as the rules compare it: Unicode compatibility normalization (NFKC: full-width and other
    /// compatibility forms become the plain characters) and then lowercase.
    static func fold(_ text: String) -> String {
        text.precomposedStringWithCompatibilityMapping.lowercased()
    }

    /// The sequences a run follows (``Pattern/run``), each read forwards and backwards: the digits
    /// (`0` both first, as counted, and last, as on the keyboard), the alphabet and the three letter
    /// rows of a QWERTY keyboard.
    static let runs: [[Character]] = ["01234567890", "abcdefghijklmnopqrstuvwxyz", "qwertyuiop", "asdfghjkl", "zxcvbnm"]
        .flatMap { (row: String) in [Array(row), Array(row.reversed())] }

    /// A pattern a folded password must not be, in the order the reasons prefer them.
    enum Pattern: Comparable {
        /// One character repeated: `aaaaaaaa`.
        case oneCharacter
        /// A unit of at most half the length repeated to fill it, the last repetition possibly cut
        /// short: `abababab`, `abcabcab`, `asdfasdf`.
        case repeatedUnit
        /// A stretch of one of ``PasswordPolicy/runs``: `12345678`, `87654321`, `qwertyui`, `lkjhgfds`.
        case run

        /// The pattern `characters` is, if any.
        init?(_ characters: [Character]) {
            guard !characters.isEmpty else { return nil }
            if Set(characters).count == 1 {
                self = .oneCharacter
            } else if Self.shortestPeriod(of: characters) * 2 <= characters.count {
                self = .repeatedUnit
            } else if Self.isRun(characters) {
                self = .run
            } else {
                return nil
            }
        }

        /// The pattern that removing one character from `characters` leaves, if any (the first in
        /// the order of the cases when removals leave different ones).
        init?(oneCharacterAddedTo characters: [Character]) {
            guard characters.count > 1 else { return nil }
            var found: Pattern?
            for index in characters.indices {
                var rest = characters
                rest.remove(at: index)
                if let pattern = Pattern(rest), found.map({ pattern < $0 }) ?? true { found = pattern }
                if found == .oneCharacter { break }
            }
            guard let pattern = found else { return nil }
            self = pattern
        }

        /// What the reason calls the pattern.
        var description: String {
            switch self {
            case .oneCharacter: "one character repeated"
            case .repeatedUnit: "a short pattern repeated (like abababab or asdfasdf)"
            case .run: "a run of consecutive digits, letters or keyboard keys (like 12345678, abcdefgh or qwertyui)"
            }
        }

        /// The length of the shortest unit that, repeated, spells `characters`, the last repetition
        /// possibly cut short (`abcabcab`: 3); `characters.count` when there is none shorter. From
        /// the longest border (a proper prefix that is also a suffix), found as in Knuth–Morris–Pratt.
        static func shortestPeriod(of characters: [Character]) -> Int {
            guard characters.count > 1 else { return characters.count }
            // border[i]: the length of the longest border of characters[0...i].
            var border = [Int](repeating: 0, count: characters.count)
            var length = 0
            for index in 1..<characters.count {
                while length > 0 && characters[index] != characters[length] { length = border[length - 1] }
                if characters[index] == characters[length] { length += 1 }
                border[index] = length
            }
            return characters.count - length
        }

        /// Whether `characters` is a stretch of one of ``PasswordPolicy/runs``.
        static func isRun(_ characters: [Character]) -> Bool {
            PasswordPolicy.runs.contains { run in
                run.count >= characters.count
                    && (0...(run.count - characters.count)).contains { start in
                        run[start..<(start + characters.count)].elementsEqual(characters)
                    }
            }
        }
    }

    /// Passwords of 8 characters or more that lead the published lists of leaked passwords, in
    /// lowercase. An attacker tries these first, so no account may have one.
    static let commonPasswords: Set<String> = [
        "12345678", "123456789", "1234567890", "12345678910", "0123456789", "01234567", "87654321", "987654321",
        "9876543210", "11223344", "12341234", "12344321", "123123123", "123321123", "147258369", "159753456",
        "123456789a", "123456789q", "1234567a", "1234567q", "12345678a", "12345qwert", "1q2w3e4r", "1q2w3e4r5t",
        "1q2w3e4r5t6y", "1qaz2wsx", "1qaz2wsx3edc", "q1w2e3r4", "q1w2e3r4t5", "qwer1234", "qwerty12", "qwerty123",
        "qwerty1234", "qwertyui", "qwertyuiop", "qwe123qwe", "123qweasd", "123qweasdzxc", "asdfghjk", "asdfghjkl",
        "asdf1234", "zxcvbnm1", "zxcvbnmm", "zaq12wsx", "zaq1zaq1", "!qaz2wsx", "1qazxsw2", "qazwsxedc",
        "password", "password1", "password12", "password123", "password!", "passw0rd", "p@ssw0rd", "p@ssword",
        "pa$$w0rd", "mypassword", "password1234", "passwort", "motdepasse", "contraseña", "iloveyou", "iloveyou1",
        "iloveyou2", "sunshine", "sunshine1", "princess", "princess1", "football", "football1", "baseball",
        "baseball1", "basketball", "welcome1", "welcome123", "abc12345", "abcd1234", "abcdefgh", "abcdefg1",
        "trustno1", "letmein1", "letmein123", "superman", "superman1", "whatever", "starwars", "starwars1",
        "computer", "michelle", "jennifer", "corvette", "mercedes", "internet", "liverpool", "chelsea1",
        "charlie1", "jordan23", "michael1", "shadow12", "master12", "master123", "dragon12", "monkey12",
        "football12", "babygirl", "babygirl1", "lovely12", "fuckyou1", "1234abcd", "a1234567", "a12345678",
        "aa123456", "aa12345678", "abc123456", "abc12345678", "q1234567", "qq123456", "zxcvbnm123", "1111111a",
        "88888888", "99999999", "00000000", "11111111", "22222222", "66666666", "12121212", "11112222",
        "98765432", "qweasdzxc", "asdasdasd", "qweqweqwe", "samsung1", "iphone12", "changeme",
        "changeme1", "administrator", "admin123", "admin1234", "adminadmin", "rootroot", "root1234", "test1234",
        "testtest", "test12345", "guest123", "default1", "secret12", "secret123", "welcome!", "summer2024",
        "summer2025", "summer2026", "winter2024", "winter2025", "winter2026", "spring2025", "autumn2025",
        "december", "november", "september", "1password", "lovelove", "freedom1", "killer12", "pokemon1",
        "minecraft", "minecraft1", "naruto12", "cookie12", "hello123", "hellohello", "helloworld",
    ]
}
