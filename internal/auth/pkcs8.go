package auth

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"hash"
)

// ErrKeyPassword is returned when ssl.key.password does not decrypt an
// encrypted PKCS#8 key.
var ErrKeyPassword = errors.New("auth: ssl.key.password does not decrypt the private key")

// maxPBKDF2Iterations bounds the work a key file may ask for.
const maxPBKDF2Iterations = 10_000_000

var (
	oidPBES2  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2 = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	// PBKDF2's PRFs (RFC 8018 B.1.2); hmacWithSHA1 when absent.
	prfs = map[string]func() hash.Hash{
		"1.2.840.113549.2.7":  sha1.New,
		"1.2.840.113549.2.8":  sha256.New224,
		"1.2.840.113549.2.9":  sha256.New,
		"1.2.840.113549.2.10": sha512.New384,
		"1.2.840.113549.2.11": sha512.New,
	}
	// AES-CBC key sizes by OID (RFC 8018 B.2.5, NIST).
	aesCBC = map[string]int{
		"2.16.840.1.101.3.4.1.2":  16,
		"2.16.840.1.101.3.4.1.22": 24,
		"2.16.840.1.101.3.4.1.42": 32,
	}
)

type encryptedPrivateKeyInfo struct {
	Algo pkix.AlgorithmIdentifier
	Data []byte
}

type pbes2Params struct {
	KDF, Cipher pkix.AlgorithmIdentifier
}

type pbkdf2Params struct {
	Salt       []byte
	Iterations int
	KeyLength  int                      `asn1:"optional"`
	PRF        pkix.AlgorithmIdentifier `asn1:"optional"`
}

// decryptPKCS8 decrypts an "ENCRYPTED PRIVATE KEY" block's DER
// (EncryptedPrivateKeyInfo, RFC 5958) with password and returns the
// PKCS#8 PrivateKeyInfo DER. It reads PBES2 (RFC 8018) with PBKDF2 (PRF
// HMAC-SHA-1, -224, -256, -384 or -512, at most 10,000,000 iterations)
// and AES-128, -192 or -256 in CBC mode: what OpenSSL 3 writes by
// default (`openssl pkcs8 -topk8`) and what Kafka's PEM keystore reads
// with ssl.key.password. Other schemes (PBES1, DES, 3DES) are refused
// naming the scheme; a wrong password is ErrKeyPassword.
func decryptPKCS8(der []byte, password string) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	if rest, err := asn1.Unmarshal(der, &info); err != nil || len(rest) > 0 {
		return nil, fmt.Errorf("auth: encrypted private key: malformed EncryptedPrivateKeyInfo: %v", err)
	}
	if !info.Algo.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("auth: encrypted private key: scheme %v is not served, only PBES2 with PBKDF2 and AES-CBC (openssl pkcs8 -topk8 -v2 aes-256-cbc)", info.Algo.Algorithm)
	}
	var params pbes2Params
	if _, err := asn1.Unmarshal(info.Algo.Parameters.FullBytes, &params); err != nil {
		return nil, fmt.Errorf("auth: encrypted private key: malformed PBES2 parameters: %v", err)
	}
	if !params.KDF.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("auth: encrypted private key: key derivation %v is not served, only PBKDF2", params.KDF.Algorithm)
	}
	var kdf pbkdf2Params
	if _, err := asn1.Unmarshal(params.KDF.Parameters.FullBytes, &kdf); err != nil {
		return nil, fmt.Errorf("auth: encrypted private key: malformed PBKDF2 parameters: %v", err)
	}
	if kdf.Iterations < 1 || kdf.Iterations > maxPBKDF2Iterations {
		return nil, fmt.Errorf("auth: encrypted private key: %d PBKDF2 iterations (1 to %d)", kdf.Iterations, maxPBKDF2Iterations)
	}
	prf := sha1.New
	if len(kdf.PRF.Algorithm) > 0 {
		var ok bool
		if prf, ok = prfs[kdf.PRF.Algorithm.String()]; !ok {
			return nil, fmt.Errorf("auth: encrypted private key: PBKDF2 PRF %v is not served", kdf.PRF.Algorithm)
		}
	}
	keyLen, ok := aesCBC[params.Cipher.Algorithm.String()]
	if !ok {
		return nil, fmt.Errorf("auth: encrypted private key: cipher %v is not served, only AES-CBC (openssl pkcs8 -topk8 -v2 aes-256-cbc)", params.Cipher.Algorithm)
	}
	if kdf.KeyLength != 0 && kdf.KeyLength != keyLen {
		return nil, fmt.Errorf("auth: encrypted private key: PBKDF2 key length %d for a %d-byte AES key", kdf.KeyLength, keyLen)
	}
	var iv []byte
	if _, err := asn1.Unmarshal(params.Cipher.Parameters.FullBytes, &iv); err != nil || len(iv) != aes.BlockSize {
		return nil, fmt.Errorf("auth: encrypted private key: malformed AES-CBC IV")
	}
	if len(info.Data) == 0 || len(info.Data)%aes.BlockSize != 0 {
		return nil, fmt.Errorf("auth: encrypted private key: %d encrypted bytes, not whole AES blocks", len(info.Data))
	}
	key, err := pbkdf2.Key(prf, password, kdf.Salt, kdf.Iterations, keyLen)
	if err != nil {
		return nil, fmt.Errorf("auth: encrypted private key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, len(info.Data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(out, info.Data)
	// PKCS#7 padding; a wrong password shows here (or in the DER below).
	pad := int(out[len(out)-1])
	if pad < 1 || pad > aes.BlockSize || !bytes.Equal(out[len(out)-pad:], bytes.Repeat([]byte{byte(pad)}, pad)) {
		return nil, ErrKeyPassword
	}
	return out[:len(out)-pad], nil
}
