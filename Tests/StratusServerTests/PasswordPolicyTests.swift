import Testing

@testable import StratusServer

/// The reasons `PasswordPolicy` gives, one per rule.
enum PasswordReason {
    static let short = "password must be at least 8 characters"
    static let long = "password must be at most 72 bytes (the bcrypt limit)"
    static let control = "password must not contain control characters"
    static let oneCharacter = "password must not be one character repeated"
    static let common = "password is one of the most common passwords; choose another"
    static let repeatedUnit = "password must not be a short pattern repeated (like abababab or asdfasdf)"
    static let run: String =
        "password must not be a run of consecutive digits, letters or keyboard keys"
        + " (like 12345678, abcdefgh or qwertyui)"
    static let oneCharacterAdded: String = oneCharacter + ", even with one character added"
    static let repeatedUnitAdded: String = repeatedUnit + ", even with one character added"
    static let runAdded: String = run + ", even with one character added"
    static let username = "password must not be the username"
    static let containsUsername = "password must not contain the username"
    static let reversedUsername = "password must not be the username reversed"
}

/// Each password rule refuses with its own reason; good passwords pass.
@Suite struct PasswordPolicyTests {
    @Test(arguments: [
        // Counted on the password as typed.
        ("short1!", PasswordReason.short), ("日本語のパスワ", PasswordReason.short),
        (String(repeating: "ab", count: 37), PasswordReason.long),
        (String(repeating: "\u{E9}x", count: 25), PasswordReason.long),
        ("correct\thorse battery", PasswordReason.control), ("nul\u{0}byte-pass", PasswordReason.control),
        // One character repeated.
        ("zzzzzzzzzz", PasswordReason.oneCharacter), ("11111111", PasswordReason.oneCharacter),
        ("ａａａａａａａａ", PasswordReason.oneCharacter), ("AaAaAaAa", PasswordReason.oneCharacter),
        // The common passwords, compared after NFKC and lowercasing.
        ("Password123", PasswordReason.common), ("P@ssW0rd", PasswordReason.common),
        ("ｐａｓｓｗｏｒｄ", PasswordReason.common), ("ＰＡＳＳＷＯＲＤ１", PasswordReason.common),
        ("qwertyui", PasswordReason.common),
        // A short unit repeated, the last repetition possibly cut short.
        ("abababab", PasswordReason.repeatedUnit), ("asdfasdf", PasswordReason.repeatedUnit),
        ("abcabcab", PasswordReason.repeatedUnit), ("ＡＢＡＢＡＢＡＢ", PasswordReason.repeatedUnit),
        ("hunter2hunter2", PasswordReason.repeatedUnit),
        (String(repeating: "ab", count: 36), PasswordReason.repeatedUnit),
        // Runs along the digits, the alphabet and the keyboard rows, either way.
        ("zyxwvuts", PasswordReason.run), ("wertyuio", PasswordReason.run), ("lkjhgfds", PasswordReason.run),
        ("0987654321", PasswordReason.run), ("Ｍｎｏｐｑｒｓｔ", PasswordReason.run),
        // One character added to one of those.
        ("11111112", PasswordReason.oneCharacterAdded), ("aaaaaaab", PasswordReason.oneCharacterAdded),
        ("aaaa!aaa", PasswordReason.oneCharacterAdded), ("abcabXcab", PasswordReason.repeatedUnitAdded),
        ("12345679", PasswordReason.runAdded), ("1zxcvbnm", PasswordReason.runAdded),
        ("mnbvcxz!", PasswordReason.runAdded),
    ])
    func refusesWithTheRulesReason(password: String, reason: String) {
        #expect(PasswordPolicy.violation(of: password, username: nil) == reason)
    }

    @Test(arguments: [
        ("victimuser", PasswordReason.username), ("VictimUser", PasswordReason.username),
        ("ｖｉｃｔｉｍｕｓｅｒ", PasswordReason.username),
        ("victimuser123", PasswordReason.containsUsername), ("my-VICTIMUSER-pass", PasswordReason.containsUsername),
        ("resumitciv", PasswordReason.reversedUsername), ("ResUmitCiv", PasswordReason.reversedUsername),
    ])
    func refusesTheUsername(password: String, reason: String) {
        #expect(PasswordPolicy.violation(of: password, username: "victimuser") == reason)
        #expect(PasswordPolicy.violation(of: password, username: nil) == nil, "only for the user's own username")
    }

    @Test func aShortUsernameMayBeInThePassword() {
        #expect(PasswordPolicy.violation(of: "correct horse battery", username: "or") == nil)
        #expect(
            PasswordPolicy.violation(of: "correct horse battery", username: "horse") == PasswordReason.containsUsername)
    }

    @Test(arguments: [
        "correct horse battery", "Tr0ub4dor&3x", "m8#kLq2!vZ", "correct horse battery staple", "kq7!mzpw",
        "abcdefg-hunter2", "passphrase of mine",
    ])
    func acceptsGoodPasswords(password: String) {
        #expect(PasswordPolicy.violation(of: password, username: nil) == nil)
        #expect(PasswordPolicy.violation(of: password, username: "victimuser") == nil)
    }

    @Test func foldingIsCompatibilityNormalizationThenLowercase() {
        #expect(PasswordPolicy.fold("ＰＡＳＳｗｏｒｄ") == "password")
        #expect(PasswordPolicy.fold("ﬁne") == "fine")
        #expect(PasswordPolicy.fold("Crème") == "crème")
    }
}
