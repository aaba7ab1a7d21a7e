import StratusModel

/// The rules a new password must meet, checked on sign-up and when an admin creates a user.
///
/// - 8 to 72 bytes (bcrypt reads no further than 72) and at least 8 characters;
/// - no control characters (NUL, tabs, newlines);
/// - not one character repeated (`aaaaaaaa`, eight NUL bytes);
/// - not one of the most common passwords (``commonPasswords``, compared without letter case).
enum PasswordPolicy {
    /// The reason `password` is refused, or `nil` when it is acceptable.
    static func violation(of password: String) -> String? {
        if password.count < 8 { return "password must be at least 8 characters" }
        if password.utf8.count > 72 { return "password must be at most 72 bytes (the bcrypt limit)" }
        if password.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return "password must not contain control characters"
        }
        if Set(password).count == 1 { return "password must not be one character repeated" }
        if commonPasswords.contains(password.lowercased()) {
            return "password is one of the most common passwords; choose another"
        }
        return nil
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
